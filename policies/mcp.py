"""What an ``mcp_proxy`` step may send: a pinned tool, with arguments its pinned schema accepts.

Checked by the gate at compile time (so the approver sees exactly what will be
sent) and again before execution with the resolved input. The schema is the
one pinned in the tool pool, never the server's live answer: a server that
changes its tools after pinning is refused at execution (``mcp_tool_changed``).
"""

from __future__ import annotations

import jsonschema
from pydantic import ValidationError

from contracts import Closed, Connector, ErrorCode, GatehouseError, JsonObject, JsonValue, McpTool

__all__ = ["McpCall", "check_call"]


class McpCall(Closed):
    """An mcp_proxy step's input."""

    tool: str
    arguments: JsonObject = {}


def check_call(step_id: str, step_input: JsonObject, connector: Connector) -> McpTool:
    """The pinned tool a step calls, or the code that refuses it."""
    details: JsonObject = {"step_id": step_id, "connector_id": connector.connector_id}
    try:
        call = McpCall.model_validate(step_input)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step_id!r} takes {{'tool': name, 'arguments': {{...}}}} only",
            details,
        ) from exc
    server = connector.mcp
    pinned = None if server is None else server.tool(call.tool)
    if pinned is None:
        allowed: list[JsonValue] = [] if server is None else [t.name for t in server.tools]
        raise GatehouseError(
            ErrorCode.MCP_TOOL_NOT_ALLOWED,
            f"step {step_id!r} calls MCP tool {call.tool[:128]!r}, which connector"
            f" {connector.connector_id!r} does not allow",
            {**details, "tool": call.tool[:128], "allowed": allowed},
        )
    try:
        validator_class = jsonschema.validators.validator_for(
            pinned.input_schema, default=jsonschema.Draft202012Validator
        )
        validator = validator_class(pinned.input_schema)
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"the pinned input schema of MCP tool {pinned.name!r} is not a valid schema",
            details,
        ) from exc
    # A schema can fail while it is applied, not only when it is read: a $ref that
    # resolves nowhere, an unknown type, a pattern that does not compile. The call
    # cannot be checked, so it is refused, never let through or left to crash.
    except Exception as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step_id!r}: the pinned input schema of MCP tool {pinned.name!r} could not"
            " be applied, and a check that errs denies",
            {**details, "tool": pinned.name, "errors": [f"{type(exc).__name__}: {str(exc)[:300]}"]},
        ) from exc
    if errors:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step_id!r}: the arguments do not match the pinned input schema of"
            f" MCP tool {pinned.name!r}",
            {
                **details,
                "tool": pinned.name,
                "pin": pinned.digest,
                "errors": [
                    {
                        "path": "/arguments/" + "/".join(str(p) for p in e.absolute_path),
                        "problem": e.message[:300],
                    }
                    for e in errors[:20]
                ],
            },
        )
    return pinned
