"""What each driver kind says of itself to the worker (``policies.kinds``): whether an
interrupted call may be sent again with the same key, whether a step is an agent's
turn or runs a program (the sandbox rule), and whether its output is outside data.
The gate's, taint's and risk's answers are tested where they are asked
(``test_gate``, ``test_taint``, ``test_risk``)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import Connector, DriverKind, JsonObject
from contracts.tool_pool import mcp_tool_digest
from policies.kinds import KINDS, rules_of

SCHEMA: dict[str, Any] = {"type": "object"}


def _connector(kind: str, **extra: Any) -> Connector:
    return Connector.model_validate(
        {"connector_id": "c", "driver_kind": kind, "description": "c", **extra}
    )


def _pin(name: str) -> dict[str, Any]:
    return {"name": name, "description": name, "input_schema": SCHEMA,
            "digest": mcp_tool_digest(name, name, SCHEMA)}  # fmt: skip


MCP = _connector(
    "mcp_proxy",
    mcp={"transport": "stdio", "command": "/usr/bin/mcp-files",
         "tools": [_pin("read_file"), _pin("write_file")], "read_only_tools": ["read_file"]},
)  # fmt: skip

# (connector, input, may an interrupted call be sent again with the same key?)
RESEND: list[tuple[Connector, JsonObject, bool]] = [
    (_connector("noop"), {"text": "hi"}, True),
    (_connector("http"), {"url": "http://127.0.0.1/x", "method": "POST"}, True),  # keyed
    (_connector("http", idempotency="none"), {"url": "http://127.0.0.1/x"}, False),
    (_connector("restricted_shell"), {"argv": ["ls"]}, False),  # a program: in doubt
    (_connector("opencode"), {"prompt": "fix it"}, False),  # an agent: reconciled instead
    (MCP, {"tool": "read_file", "arguments": {}}, True),  # the pool lists it read-only
    (MCP, {"tool": "write_file", "arguments": {}}, False),  # MCP has no keys: in doubt
]


@pytest.mark.parametrize(("connector", "given", "again"), RESEND)
def test_which_interrupted_calls_may_be_sent_again(
    connector: Connector, given: JsonObject, again: bool
) -> None:
    assert rules_of(connector.driver_kind).may_resend(connector, given) is again


def test_only_an_agent_turn_counts_model_turns_and_only_programs_take_the_sandbox_rule() -> None:
    assert {k for k, r in KINDS.items() if r.agent_turn} == {DriverKind.OPENCODE}
    # a stdio MCP server is a program too
    programs = {k for k, r in KINDS.items() if r.runs_a_program}
    assert programs == {DriverKind.RESTRICTED_SHELL, DriverKind.MCP_PROXY}


def test_every_kind_but_a_note_gives_outside_data() -> None:
    assert {k for k, r in KINDS.items() if not r.outside_data} == {DriverKind.NOOP}


@pytest.mark.parametrize("kind", list(DriverKind), ids=lambda k: k.value)
def test_each_kind_is_listed_under_its_own_name(kind: DriverKind) -> None:
    assert rules_of(kind).kind is kind
