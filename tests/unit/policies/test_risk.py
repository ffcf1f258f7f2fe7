"""Each step's risk class (read / change / outside world), over every driver kind,
and the ⚠ a plan card gives only to the classes that earn it."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import Connector, DriverKind, Plan, PlanStep, ToolPool
from contracts.tool_pool import mcp_tool_digest
from policies.risk import Risk, plan_risks, risk_words, step_risk
from policies.summary import summarize

SCHEMA: dict[str, Any] = {"type": "object"}


def _pin(name: str) -> dict[str, Any]:
    return {"name": name, "description": name, "input_schema": SCHEMA,
            "digest": mcp_tool_digest(name, name, SCHEMA)}  # fmt: skip


def _connector(cid: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {"connector_id": cid, "driver_kind": kind, "description": cid, **extra}


def _dest(host: str) -> dict[str, Any]:
    return {"scheme": "http", "host": host, "allow_private": True}


POOL = ToolPool.model_validate({
    "tool_pool_id": "p", "version": "1", "description": "every kind",
    "connectors": [
        _connector("note", "noop"),
        _connector("local", "http", destinations=[_dest("127.0.0.1"), _dest("localhost")]),
        _connector("api", "http", destinations=[_dest("api.example.com")]),
        _connector("sh", "restricted_shell",
                   commands=[{"name": "ls", "path": "/usr/bin/ls"}]),
        _connector("oc", "opencode"),
        _connector("files", "mcp_proxy", mcp={
            "transport": "stdio", "command": "/usr/bin/mcp-files",
            "tools": [_pin("read_file"), _pin("write_file")], "read_only_tools": ["read_file"]}),
        _connector("near", "mcp_proxy", destinations=[_dest("127.0.0.1")], mcp={
            "transport": "streamable_http", "url": "http://127.0.0.1:9000/mcp",
            "tools": [_pin("search")], "read_only_tools": ["search"]}),
        _connector("far", "mcp_proxy", destinations=[_dest("mcp.example.com")], mcp={
            "transport": "streamable_http", "url": "http://mcp.example.com/mcp",
            "tools": [_pin("search")], "read_only_tools": ["search"]}),
    ],
})  # fmt: skip


def _step(cid: str, kind: str, given: dict[str, Any] | None) -> PlanStep:
    body: dict[str, Any] = {"step_id": "s", "verb": "read", "connector_id": cid}
    body["driver_kind"] = kind
    body |= {"input": given} if given is not None else {"input_from": {"step_id": "a"}}
    return PlanStep.model_validate(body)


# (connector, driver kind, input (None: from an earlier step), class)
CASES = [
    ("note", "noop", {"text": "hi"}, Risk.READ),
    ("local", "http", {"url": "http://127.0.0.1:8080/x"}, Risk.READ),
    ("local", "http", {"url": "http://localhost/x", "method": "HEAD"}, Risk.READ),
    ("local", "http", {"url": "http://[::1]/x", "method": "get"}, Risk.READ),
    ("local", "http", {"url": "http://127.0.0.1/x", "method": "POST"}, Risk.CHANGE),
    ("local", "http", None, Risk.CHANGE),  # address unknown, but every destination is local
    ("api", "http", {"url": "https://api.example.com/v1"}, Risk.OUTSIDE),  # a GET leaves, too
    ("api", "http", {"url": "https://api.example.com/v1", "method": "DELETE"}, Risk.OUTSIDE),
    ("api", "http", None, Risk.OUTSIDE),
    ("local", "http", {"url": "http://10.0.0.5/x"}, Risk.OUTSIDE),  # private is not this machine
    ("sh", "restricted_shell", {"argv": ["ls"]}, Risk.CHANGE),
    ("oc", "opencode", {"prompt": "fix it"}, Risk.CHANGE),
    ("files", "mcp_proxy", {"tool": "read_file", "arguments": {}}, Risk.READ),
    ("files", "mcp_proxy", {"tool": "write_file", "arguments": {}}, Risk.CHANGE),
    ("files", "mcp_proxy", None, Risk.CHANGE),  # which tool is not known yet
    ("near", "mcp_proxy", {"tool": "search", "arguments": {}}, Risk.READ),
    ("far", "mcp_proxy", {"tool": "search", "arguments": {}}, Risk.OUTSIDE),
]


def test_every_driver_kind_is_covered() -> None:
    assert {DriverKind(kind) for _, kind, _, _ in CASES} == set(DriverKind)


@pytest.mark.parametrize(("cid", "kind", "given", "risk"), CASES)
def test_each_step_gets_its_class(
    cid: str, kind: str, given: dict[str, Any] | None, risk: Risk
) -> None:
    connector = POOL.connector(cid)
    assert connector is not None
    assert step_risk(_step(cid, kind, given), connector) is risk


@pytest.mark.parametrize("kind", ["http", "mcp_proxy"])
def test_without_the_pool_a_step_that_may_leave_is_outside(kind: str) -> None:
    # an http step's address from an earlier step; an MCP server nobody can look up
    given = None if kind == "http" else {"tool": "t"}
    assert step_risk(_step("gone", kind, given), None) is Risk.OUTSIDE


def test_only_change_and_outside_earn_a_warning_on_the_card() -> None:
    steps = [
        {"step_id": f"s{i}", "verb": "read", "connector_id": c, "driver_kind": k,
         **({"input": g} if g is not None else {"input_from": {"step_id": "s0"}})}
        for i, (c, k, g, _) in enumerate(CASES)
    ]  # fmt: skip
    plan = Plan.model_validate({"objective": "o", "steps": steps})
    expected = [risk for *_, risk in CASES]
    assert plan_risks(plan, POOL) == expected
    card = summarize(plan, POOL)
    assert [s.risk for s in card.steps] == expected
    assert [s.risk.warns for s in card.steps] == [r is not Risk.READ for r in expected]


def test_the_read_only_mcp_tool_does_not_warn_and_the_writing_one_does() -> None:
    plan = Plan.model_validate({"objective": "o", "steps": [
        {"step_id": "r", "verb": "read", "connector_id": "files", "driver_kind": "mcp_proxy",
         "input": {"tool": "read_file", "arguments": {"path": "a"}}},
        {"step_id": "w", "verb": "read", "connector_id": "files", "driver_kind": "mcp_proxy",
         "input": {"tool": "write_file", "arguments": {"path": "a"}}},
    ]})  # fmt: skip
    warned = [s.step_id for s in summarize(plan, POOL).steps if s.risk.warns]
    assert warned == ["w"]


def test_the_risk_line_counts_steps_most_first() -> None:
    assert risk_words([Risk.READ, Risk.READ]) == "read only"
    risks = [Risk.CHANGE, Risk.READ, Risk.OUTSIDE, Risk.CHANGE]
    assert risk_words(risks) == "outside world (1 step), change (2 steps)"


def test_connectors_in_the_pool_parse() -> None:
    # the pool above is what the cases use: a typo there would test nothing
    assert all(isinstance(c, Connector) for c in POOL.connectors)
    assert len(POOL.connectors) == 8
