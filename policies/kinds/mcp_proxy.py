"""mcp_proxy: one ``tools/call`` to a pinned tool of the connector's MCP server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from contracts import Connector, DriverKind, JsonObject, JsonValue, PlanStep, ToolPool
from policies.cedar_vocab import as_cedar, attr, mcp_tool_id, typed
from policies.destinations import is_loopback
from policies.kinds._base import KindRules, Said, Wrong, short, string_into, text_of
from policies.mcp import check_call

__all__ = ["McpProxy"]

# Pinned JSON Schema types Cedar can hold exactly; any other argument is left out.
_SCALARS: dict[str, str] = {"string": "String", "integer": "Long", "boolean": "Boolean"}


def _arguments(pools: Sequence[ToolPool]) -> JsonObject:
    """One record of every pinned MCP tool's top-level scalar arguments, each optional;
    a name the tools type differently (or as no scalar) is left out."""
    seen: dict[str, str | None] = {}
    for pool in pools:
        for connector in pool.connectors:
            for tool in connector.mcp.tools if connector.mcp is not None else []:
                props = tool.input_schema.get("properties")
                for name, spec in props.items() if isinstance(props, dict) else []:
                    kind = spec.get("type") if isinstance(spec, dict) else None
                    cedar = _SCALARS.get(kind) if isinstance(kind, str) else None
                    seen[name] = cedar if seen.get(name, cedar) == cedar else None
    attributes: JsonObject = {n: attr(t, False) for n, t in sorted(seen.items()) if t is not None}
    return {"type": "Record", "attributes": attributes}


class McpProxy(KindRules):
    kind: ClassVar[DriverKind] = DriverKind.MCP_PROXY
    # The tool is the instruction; its arguments are data a profile may open to
    # outside values (``tainted_data: {"mcp_proxy": ["/arguments/<name>"]}``): they are
    # held to the pinned input schema before execution all the same.
    never_data: ClassVar[tuple[str, ...]] = ("/tool",)
    # a stdio MCP server is a program too: the same sandbox rule holds
    runs_a_program: ClassVar[bool] = True
    cedar_resources: ClassVar[tuple[str, ...]] = ("Connector", "McpTool")

    def check_input(
        self, step: PlanStep, step_input: JsonObject, connector: Connector, details: JsonObject
    ) -> None:
        check_call(step.step_id, step_input, connector)

    def cedar_schema(self, pools: Sequence[ToolPool]) -> dict[str, JsonValue]:
        return {
            "tool": attr("String", False),
            "arguments": {**_arguments(pools), "required": False},
        }

    def cedar_context(self, step_input: JsonObject, pool: ToolPool, wrong: Wrong) -> JsonObject:
        out: JsonObject = {}
        string_into(out, step_input, "tool", wrong)
        args = step_input.get("arguments", {})
        typed_args = _arguments([pool]).get("attributes")
        if not isinstance(args, dict):
            wrong("arguments", "an object")
        elif isinstance(typed_args, dict):
            held: JsonObject = {}
            for name, value in args.items():
                if name not in typed_args:
                    continue  # no policy can name it: the schema does not type it
                spec = typed_args[name]
                exact = as_cedar(value, spec)
                if exact is None:
                    wanted = spec.get("type") if isinstance(spec, dict) else None
                    wrong(f"arguments/{name}", f"a Cedar {wanted}")
                else:
                    held[name] = exact
            out["arguments"] = held
        return out

    def cedar_resource(self, connector_id: str, step_input: JsonObject | None) -> JsonObject | None:
        tool = None if step_input is None else step_input.get("tool")
        if not isinstance(tool, str):
            return None
        return {"type": typed("McpTool"), "id": mcp_tool_id(connector_id, tool)}

    def said(self, given: JsonObject, connector_id: str) -> Said:
        tool = text_of(given, "tool", "(a tool)")
        arguments = given.get("arguments")
        shown = f" with {short(arguments)}" if arguments else ""
        return Said(
            f"Calls MCP tool {tool} on {connector_id}{shown}", tool=f"{tool} ({connector_id})"
        )

    def request(
        self, given: JsonObject, connector_id: str, connector: Connector | None
    ) -> str | None:
        call = {"name": given.get("tool"), "arguments": given.get("arguments", {})}
        return f"tools/call to {connector_id}: " + json.dumps(
            call, ensure_ascii=False, sort_keys=True
        )

    def read_only(self, step_input: JsonObject | None, connector: Connector | None) -> bool:
        """A tool its connector lists as read-only."""
        if step_input is None or connector is None or connector.mcp is None:
            return False
        return step_input.get("tool") in connector.mcp.read_only_tools

    def leaves_machine(self, given: JsonObject | None, connector: Connector | None) -> bool:
        """Unless its server is stdio, or streamable HTTP on loopback."""
        server = connector.mcp if connector is not None else None
        if server is None:
            return True
        return server.transport == "streamable_http" and not is_loopback(
            server.url or "", is_url=True
        )

    def may_resend(self, connector: Connector, step_input: JsonObject) -> bool:
        """MCP has no idempotency keys: only a tool the connector declares read-only may be
        sent again; any other interrupted MCP call is in doubt."""
        return self.read_only(step_input, connector)
