"""A plan in plain words: one sentence per step, and the lists an approver reads first."""

from __future__ import annotations

from contracts import Plan
from policies.summary import summarize


def _plan(*steps: dict[str, object]) -> Plan:
    return Plan.model_validate({"objective": "o", "steps": list(steps)})


def test_each_kind_of_step_is_said_in_words() -> None:
    plan = _plan(
        {"step_id": "read", "verb": "read", "connector_id": "api", "driver_kind": "http",
         "input": {"url": "https://api.example.com/v1/items", "method": "GET"}},
        {"step_id": "post", "verb": "write", "connector_id": "api", "driver_kind": "http",
         "title": "File it", "input": {"url": "https://api.example.com/v1/items",
                                       "method": "POST", "json": {"a": 1}}},
        {"step_id": "ls", "verb": "run", "connector_id": "sh",
         "driver_kind": "restricted_shell", "input": {"argv": ["ls", "-la", "src"]}},
        {"step_id": "fix", "verb": "edit", "connector_id": "oc", "driver_kind": "opencode",
         "input": {"prompt": "Fix   the\\nfailing test " + "x" * 300}},
        {"step_id": "ask", "verb": "read", "connector_id": "docs", "driver_kind": "mcp_proxy",
         "input": {"tool": "search", "arguments": {"q": "retry"}}},
        {"step_id": "note", "verb": "note", "connector_id": "note", "driver_kind": "noop",
         "input": {"text": "done"}},
    )  # fmt: skip
    words = summarize(plan)
    says = {s.step_id: s.says for s in words.steps}
    assert says["read"] == "Sends GET to https://api.example.com/v1/items"
    assert says["post"] == "Sends POST to https://api.example.com/v1/items with a JSON body"
    assert says["ls"] == "Runs `ls -la src` in the sandbox"
    assert says["fix"].startswith("Asks an OpenCode agent") and says["fix"].endswith("…”")
    assert says["ask"] == "Calls MCP tool search on docs with {'q': 'retry'}"
    assert says["note"] == "Records a note: done"
    assert [s.changes for s in words.steps] == [False, True, True, True, True, False]
    assert words.steps[1].title == "File it"
    assert words.destinations == ["GET api.example.com", "POST api.example.com"]
    assert words.commands == ["ls"] and words.tools == ["search (docs)"] and words.agents == 1
    assert words.read_only is False and words.outside_data == []


def test_outside_data_is_named_with_where_it_comes_from() -> None:
    plan = _plan(
        {"step_id": "get", "verb": "read", "connector_id": "api", "driver_kind": "http",
         "input": {"url": "https://api.example.com/v1/items"}},
        {"step_id": "keep", "verb": "note", "connector_id": "note", "driver_kind": "noop",
         "input_from": {"step_id": "get", "pointer": "/body"}},
    )  # fmt: skip
    words = summarize(plan)
    assert words.outside_data == ["keep"]
    assert words.steps[1].outside == "takes /body of step get's output"
    assert words.read_only is True and words.destinations == ["GET api.example.com"]
