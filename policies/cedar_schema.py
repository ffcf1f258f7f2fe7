"""The Cedar schema and entities of a set of tool pools, in namespace ``Gatehouse``: one
action per driver kind (its context: what every step has, and what its kind adds,
``policies.kinds``), a ``Connector`` per connector in its ``ToolPool``, an ``McpTool``
per pinned MCP tool in its connector. The Cedar gate (``policies.cedar_gate``) checks
policy sets against the schema and evaluates requests against the entities. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from contracts import JsonObject, JsonValue, ToolPool
from policies.cedar_vocab import NAMESPACE, attr, mcp_tool_id, typed
from policies.kinds import KINDS

__all__ = ["entities", "schema_for"]


def schema_for(pools: Sequence[ToolPool]) -> JsonObject:
    """The Cedar schema (JSON form) of the tool pools: entity types, one action per
    driver kind, and each action's context."""
    budgets: JsonObject = {
        "type": "Record",
        "attributes": {
            "max_steps": attr("Long", False),
            "max_model_turns": attr("Long", False),
            "max_tokens": attr("Long", False),
            "max_cost_cents": attr("Long", False),
            "max_wall_s": attr("Long", False),
        },
    }
    common: dict[str, JsonValue] = {
        "step_id": attr("String"),
        "verb": attr("String"),
        "connector_id": attr("String"),
        "tool_pool": attr("String"),
        "profile": attr("String"),
        "tainted": attr("Boolean"),
        "input_known": attr("Boolean"),
        "read_only": attr("Boolean"),
        "risk": attr("String"),
        "profile_max_steps": attr("Long"),
        "budgets": budgets,
        # who approved the step's plan: set at run time, absent at submit
        "approver": attr("Entity", False, name="User"),
    }
    actions: JsonObject = {}
    for kind, rules in KINDS.items():
        context = {**common, **rules.cedar_schema(pools)}
        actions[kind.value] = {
            "appliesTo": {
                "principalTypes": ["User"],
                "resourceTypes": list[JsonValue](rules.cedar_resources),
                "context": {"type": "Record", "attributes": context},
            }
        }
    entity_types: JsonObject = {
        "User": {},
        "ToolPool": {},
        "Connector": {
            "memberOfTypes": ["ToolPool"],
            "shape": {
                "type": "Record",
                "attributes": {
                    "driver_kind": attr("String"),
                    "tool_pool": attr("String"),
                    "idempotent": attr("Boolean"),
                },
            },
        },
        "McpTool": {
            "memberOfTypes": ["Connector"],
            "shape": {
                "type": "Record",
                "attributes": {
                    "name": attr("String"),
                    "connector": attr("String"),
                    "read_only": attr("Boolean"),
                    "pin": attr("String"),
                },
            },
        },
    }
    return {NAMESPACE: {"entityTypes": entity_types, "actions": actions}}


def entities(pools: Sequence[ToolPool]) -> Iterator[tuple[str, str, JsonObject, list[JsonValue]]]:
    for pool in pools:
        pool_ref: JsonValue = {"type": typed("ToolPool"), "id": pool.tool_pool_id}
        yield "ToolPool", pool.tool_pool_id, {}, []
        for c in pool.connectors:
            attrs: JsonObject = {
                "driver_kind": c.driver_kind.value,
                "tool_pool": pool.tool_pool_id,
                "idempotent": c.idempotency == "key",
            }
            yield "Connector", c.connector_id, attrs, [pool_ref]
            server = c.mcp
            for tool in server.tools if server is not None else []:
                tool_attrs: JsonObject = {
                    "name": tool.name,
                    "connector": c.connector_id,
                    "read_only": tool.name in server.read_only_tools if server else False,
                    "pin": tool.digest,
                }
                parent: JsonValue = {"type": typed("Connector"), "id": c.connector_id}
                yield "McpTool", mcp_tool_id(c.connector_id, tool.name), tool_attrs, [parent]
