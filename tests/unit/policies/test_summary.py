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
    assert says["ask"] == 'Calls MCP tool search on docs with {"q": "retry"}'
    assert says["note"] == "Records a note: done"
    assert words.steps[1].title == "File it"
    assert words.destinations == ["GET api.example.com", "POST api.example.com"]
    assert words.commands == ["ls"] and words.tools == ["search (docs)"] and words.agents == 1
    assert words.outside_data == []


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
    assert words.destinations == ["GET api.example.com"]


def test_each_request_is_spelled_as_its_handler_will_send_it() -> None:
    from policies import catalog

    pool = catalog.tool_pool("default").model
    plan = _plan(
        {"step_id": "post", "verb": "write", "connector_id": "local-http", "driver_kind": "http",
         "input": {"url": "http://127.0.0.1:8080/v1/items?dry=1", "method": "POST",
                   "headers": {"Authorization": "Bearer abc", "X-Trace": "t1"},
                   "json": {"name": "é"}}},
        {"step_id": "get", "verb": "read", "connector_id": "local-http-unkeyed",
         "driver_kind": "http", "input": {"url": "http://127.0.0.1:8080/"}},
        {"step_id": "count", "verb": "run", "connector_id": "workspace-shell",
         "driver_kind": "restricted_shell", "input": {"argv": ["wc", "-l", "a.txt"]}},
        {"step_id": "keep", "verb": "note", "connector_id": "note", "driver_kind": "noop",
         "input_from": {"step_id": "get"}},
    )  # fmt: skip
    sent = {s.step_id: s.request for s in summarize(plan, pool).steps}
    assert sent["post"] == "\n".join([
        "POST /v1/items?dry=1 HTTP/1.1", "Host: 127.0.0.1:8080", "Authorization: •••",
        "X-Trace: t1", "Idempotency-Key: (the call's op key, fixed when it runs)",
        "Accept-Encoding: identity", "Content-Type: application/json", "", '{"name": "é"}',
    ])  # fmt: skip
    assert "Idempotency-Key" not in str(sent["get"])  # its connector sends no key
    assert str(sent["get"]).startswith("GET / HTTP/1.1\nHost: 127.0.0.1:8080")
    assert str(sent["count"]).startswith('argv: ["wc", "-l", "a.txt"]')
    assert sent["keep"] is None  # its whole input comes from an earlier step
