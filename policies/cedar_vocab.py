"""The words a Cedar schema, request and entity are written in, shared by the Cedar
gate (``policies.cedar_gate``) and the kinds' own attributes (``policies.kinds``)."""

from __future__ import annotations

import math

from contracts import JsonObject, JsonValue

__all__ = ["NAMESPACE", "as_cedar", "attr", "mcp_tool_id", "set_of_strings", "typed"]

NAMESPACE = "Gatehouse"

# A Cedar Long is a signed 64-bit integer.
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def typed(name: str) -> str:
    """An entity type's name in the namespace: ``Gatehouse::Connector``."""
    return f"{NAMESPACE}::{name}"


def attr(type_: str, required: bool = True, **more: JsonValue) -> JsonObject:
    """A schema attribute of Cedar type ``type_``."""
    out: JsonObject = {"type": type_, **more}
    if not required:
        out["required"] = False
    return out


def set_of_strings(required: bool = True) -> JsonObject:
    return attr("Set", required, element={"type": "String"})


def mcp_tool_id(connector_id: str, tool: str) -> str:
    """The id of an ``McpTool`` entity: ``<connector_id>/<tool>``."""
    return f"{connector_id}/{tool}"


def as_cedar(value: JsonValue, spec: JsonValue) -> JsonValue:
    """``value`` as the Cedar type ``spec`` names, or None when it is not one. A JSON
    number with no fraction (``500.0``) passes a pinned "integer" schema, so it is
    that integer here too, never dropped for being a float."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "String":
        return value if isinstance(value, str) else None
    if kind == "Boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and _LONG_MIN <= value <= _LONG_MAX else None
