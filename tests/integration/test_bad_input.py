"""Every refused intent gets its own stable code, a 4xx, and writes nothing at all."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.stack import Stack

ONE_MIB = 1024 * 1024


def row_counts(stack: Stack) -> dict[str, int]:
    stack.settle()  # a run accepted by an earlier test may still be compiling
    tables = ["intents", "runs", "calls", "plan_cards", "plan_approvals", stack.workflow_table]
    return {t: stack.sql(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables}


def refusals(stack: Stack) -> list[str]:
    """Codes of the recorded request refusals (MOVA security episodes), oldest first;
    a row standing for repeats of one refusal gives its code that many times."""
    rows = stack.sql(
        "SELECT error_code, repeat_count FROM security_events ORDER BY recorded_at, episode_id"
    )
    return [str(code) for code, repeats in rows for _ in range(int(repeats))]


def intent(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "recipe": "echo",
        "objective": "refuse me",
        "parameters": {"n": 1},
        "mode": "full-cycle",
    }
    body.update(overrides)
    return body


def step(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "step_id": "only",
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"message": "hi"},
    }
    base.update(fields)
    return base


def plan_intent(*steps: dict[str, Any]) -> dict[str, Any]:
    return intent(mode="run-plan", plan={"objective": "refuse me", "steps": list(steps)})


def shell(argv: list[str]) -> dict[str, Any]:
    return step(
        verb="run",
        connector_id="workspace-shell",
        driver_kind="restricted_shell",
        input={"argv": argv},
    )


def http(url: str) -> dict[str, Any]:
    return step(
        verb="fetch",
        connector_id="local-http",
        driver_kind="http",
        input={"method": "GET", "url": url},
    )


JSON = {"content-type": "application/json"}


# (id, raw body bytes, headers, status, error code)
def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": [value]}
    return value


RAW_CASES: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("malformed-json", b'{"recipe": "echo", "objective": ', JSON, 400, "invalid_json"),
    ("not-utf8", b'{"recipe": "\xff\xfe"}', JSON, 400, "invalid_json"),
    (
        "text-plain",
        json.dumps(intent()).encode(),
        {"content-type": "text/plain"},
        415,
        "unsupported_media_type",
    ),
    ("no-content-type", json.dumps(intent()).encode(), {}, 415, "unsupported_media_type"),
    (
        "too-large",
        json.dumps(intent(objective="x" * (ONE_MIB + 16))).encode(),
        JSON,
        413,
        "payload_too_large",
    ),
    ("json-array", b"[1, 2, 3]", JSON, 422, "invalid_request"),
    # not JSON, though Python's decoder takes them; stored, they would break every read
    (
        "nan",
        b'{"recipe": "echo", "objective": "x", "parameters": {"n": NaN}}',
        JSON,
        400,
        "invalid_json",
    ),
    (
        "infinity",
        b'{"recipe": "echo", "objective": "x", "parameters": {"n": Infinity}}',
        JSON,
        400,
        "invalid_json",
    ),
    (
        "minus-infinity",
        b'{"recipe": "echo", "objective": "x", "parameters": {"n": -Infinity}}',
        JSON,
        400,
        "invalid_json",
    ),
    # numbers too large for a 64-bit float: Python's decoder reads them as infinity,
    # which no encoder writes back (a stored one made every read of the run a 500)
    *(
        (
            name,
            b'{"recipe": "echo", "objective": "x", "parameters": {"n": ' + n + b"}}",
            JSON,
            400,
            "invalid_json",
        )
        for name, n in (
            ("1e999", b"1e999"),
            ("minus-1e999", b"-1e999"),
            ("401-digit-float", b"9" * 401 + b".0"),
        )
    ),
    (
        "1e999-in-a-plan",
        b'{"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": {"objective": "x",'
        b' "steps": [{"step_id": "s1", "verb": "note", "driver_kind": "noop",'
        b' "connector_id": "noop", "input": {"x": 1e999}}]}}',
        JSON,
        400,
        "invalid_json",
    ),
    # past the decoder's recursion limit, and at the schema validator's
    ("deep-json", b"[" * 5000 + b"]" * 5000, JSON, 400, "json_too_deep"),
    (
        "deep-parameters",
        json.dumps(intent(parameters={"n": _nested(400)})).encode(),
        JSON,
        400,
        "json_too_deep",
    ),
    (
        "deep-plan-input",
        json.dumps(plan_intent(step(input={"m": _nested(300)}))).encode(),
        JSON,
        400,
        "json_too_deep",
    ),
]

# (id, body, status, error code)
BODY_CASES: list[tuple[str, dict[str, Any], int, str]] = [
    ("objective-int", intent(objective=5), 422, "invalid_request"),
    ("unknown-field", intent(priority="high"), 422, "invalid_request"),
    ("missing-recipe", {"objective": "no recipe"}, 422, "invalid_request"),
    ("bad-mode", intent(mode="yolo"), 422, "invalid_request"),
    ("unknown-recipe", intent(recipe="no-such-recipe"), 422, "unknown_recipe"),
    ("unknown-profile", intent(policy_profile="no-such-profile"), 422, "unknown_profile"),
    ("unknown-pool", intent(tool_pool="no-such-pool"), 422, "unknown_tool_pool"),
    (
        "params-off-schema",
        intent(recipe="demo-inventory", parameters={"base_url": "http://example.com"}),
        422,
        "invalid_request",
    ),
    ("run-plan-without-plan", intent(mode="run-plan"), 422, "invalid_request"),
    (
        "plan-without-run-plan",
        {**plan_intent(step()), "mode": "full-cycle"},
        422,
        "invalid_request",
    ),
    ("unknown-connector", plan_intent(step(connector_id="ghost")), 422, "unknown_connector"),
    ("shell-rm", plan_intent(shell(["rm", "-rf", "x"])), 422, "command_not_allowed"),
    ("shell-cat-passwd", plan_intent(shell(["cat", "/etc/passwd"])), 422, "command_not_allowed"),
    (
        "duplicate-step-id",
        plan_intent(step(), step(input={"message": "again"})),
        422,
        "invalid_request",
    ),
    (
        "shell-later-step",
        plan_intent(step(), shell(["rm", "-rf", "/"]) | {"step_id": "two"}),
        422,
        "command_not_allowed",
    ),
    ("http-private", plan_intent(http("http://10.0.0.1/x")), 422, "destination_not_allowed"),
    ("http-public", plan_intent(http("http://example.com/")), 422, "destination_not_allowed"),
    (
        "noop-on-http",
        plan_intent(step(connector_id="local-http", driver_kind="noop")),
        422,
        "driver_not_allowed",
    ),
    (
        "result-in-plan",
        plan_intent(step(input={"stdout": "root:x:0:0"})),
        422,
        "plan_contains_results",
    ),
    (
        "nested-result-in-plan",
        plan_intent(step(input={"message": [{"exit_code": 0}]})),
        422,
        "plan_contains_results",
    ),
    ("step-condition", plan_intent(step(condition="x > 1")), 422, "invalid_request"),
    ("step-loop", plan_intent(step(loop={"times": 3})), 422, "invalid_request"),
    (
        "plan-extra-field",
        intent(mode="run-plan", plan={"objective": "o", "steps": [step()], "code": "rm -rf /"}),
        422,
        "invalid_request",
    ),
    (
        "input-and-input-from",
        plan_intent(step(input_from={"step_id": "only"})),
        422,
        "invalid_request",
    ),
    (
        "empty-plan",
        intent(mode="run-plan", plan={"objective": "o", "steps": []}),
        422,
        "invalid_request",
    ),
    ("nul-in-objective", intent(objective="before\x00after"), 422, "invalid_request"),
]


def error_of(r: Any) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert set(err) == {"code", "message", "retryable", "details"}, err
    assert err["retryable"] is False, err
    return err


@pytest.mark.parametrize(
    ("raw", "headers", "status", "code"),
    [c[1:] for c in RAW_CASES],
    ids=[c[0] for c in RAW_CASES],
)
def test_raw_body_refused(
    stack: Stack, raw: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    before, events = row_counts(stack), refusals(stack)
    r = stack.client.post("/intent", content=raw, headers=headers)
    assert r.status_code == status, r.text
    assert error_of(r)["code"] == code
    assert row_counts(stack) == before
    assert sorted(refusals(stack)) == sorted([*events, code])


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [c[1:] for c in BODY_CASES],
    ids=[c[0] for c in BODY_CASES],
)
def test_body_refused(stack: Stack, body: dict[str, Any], status: int, code: str) -> None:
    before, events = row_counts(stack), refusals(stack)
    r = stack.submit(body, key="bad-input-key")
    assert r.status_code == status, r.text
    assert error_of(r)["code"] == code
    assert row_counts(stack) == before
    # nothing of the request is written, but the refusal itself is evidence
    assert sorted(refusals(stack)) == sorted([*events, code])
    # a refused request does not claim its Idempotency-Key either
    claimed = "SELECT COUNT(*) FROM intents WHERE idempotency_key LIKE '% bad-input-key'"
    assert stack.sql(claimed) == [(0,)]


@pytest.mark.parametrize(
    "body",
    [
        intent(submitted_by="a\x00b"),
        intent(recipe="echo\x00"),
        plan_intent(step(title="t\x00")),
        intent(mode="run-plan", plan={"objective": "o\x00", "steps": [step()]}),
    ],
    ids=["submitted_by", "recipe", "step-title", "plan-objective"],
)
def test_nul_in_text_is_a_4xx(stack: Stack, body: dict[str, Any]) -> None:
    """NUL cannot be stored in PostgreSQL text: refused up front, never a 500."""
    before = row_counts(stack)
    r = stack.submit(body)
    assert r.status_code == 422, r.text
    assert error_of(r)["code"] == "invalid_request"
    assert row_counts(stack) == before


def test_nul_in_free_json_is_kept_as_data(stack: Stack) -> None:
    """Inside free-form JSON a NUL is data: stored escaped, read back intact, on both backends."""
    params = {"note": "x\x00y", "k\x00": 1}
    r = stack.submit(intent(parameters=params))
    assert r.status_code == 202, r.text
    run = stack.wait(r.json()["run_id"], {"waiting_approval", "failed"})
    assert run["status"] == "waiting_approval", run
    assert run["plan_card"]["plan"]["steps"][0]["input"] == {"parameters": params}
    # leave no workflow waiting in recv: the module's worker must shut down promptly
    decided = stack.client.post(
        f"/reject/{run['run_id']}", json={"plan_digest": run["plan_card"]["plan_digest"]}
    )
    assert decided.status_code == 200, decided.text
    assert stack.wait(run["run_id"], {"rejected", "failed"})["status"] == "rejected"


def test_bad_idempotency_key_header(stack: Stack) -> None:
    before = row_counts(stack)
    r = stack.submit(intent(), key="has spaces and /slashes")
    assert r.status_code == 422, r.text
    assert error_of(r)["code"] == "invalid_request"
    assert row_counts(stack) == before


def test_nesting_within_the_limit_is_accepted(stack: Stack) -> None:
    r = stack.submit(intent(mode="plan-only", parameters={"n": 1, "deep": _nested(30)}))
    assert r.status_code in (202, 422), r.text  # accepted, or refused by the recipe's schema
    assert r.json().get("error", {}).get("code") != "json_too_deep"


def _read_answer(conn: Any) -> str:
    """One HTTP/1.1 answer: its headers, then as many body bytes as they announce."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data.decode()
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.decode().split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode()


def test_a_body_that_stops_coming_is_answered(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Content-Length promises more than is sent: the shim answers 408 instead of waiting
    for as long as the client holds the connection."""
    import socket

    from shim.api import http as _http
    from tests.support.served import ServedShim

    monkeypatch.setattr(_http, "BODY_READ_TIMEOUT_S", 1.0)
    before = row_counts(stack)
    token = stack.client.people.tokens["alice"]
    with ServedShim(stack.database_url, stack.client.people.file) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(
                b"POST /intent HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {token}\r\n".encode()
                + b'Content-Length: 1000\r\n\r\n{"recipe": '
            )
            answer = _read_answer(conn)
    assert answer.startswith("HTTP/1.1 408"), answer[:200]
    assert '"body_timeout"' in answer
    assert row_counts(stack) == before


# Every column a run's free-form JSON is stored in, as text.
_PLAN_TEXTS = (
    ("intents", "request_json"),
    ("plan_cards", "plan_json"),
    ("plan_revisions", "plan_json"),
)


def test_a_stored_non_finite_number_never_makes_a_run_unreadable(stack: Stack) -> None:
    """A number no JSON can carry, stored before the door refused it (written here
    behind Gatehouse's back, as an older release stored ``1e999``): every read of the
    run answers 200 with the rest of the run and a marked placeholder where the
    number was; the plan cannot be approved (the run would execute a number nobody
    can see), and it can still be rejected."""
    from tests.integration.test_dashboard import _login
    from tests.support.plans import NOTE, digest_of_plan

    plan = {"objective": "x", "steps": [{**NOTE, "input": {"text": "hi", "x": 1.5, "y": 2.5}}]}
    body = {"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan}
    r = stack.submit({**body, "parameters": {"p": 3.5}})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    for table, column in _PLAN_TEXTS:
        stack.execute(
            f"UPDATE {table} SET {column} = REPLACE(REPLACE(REPLACE({column}, '1.5', 'Infinity'),"
            f" '2.5', '-Infinity'), '3.5', 'NaN') WHERE {column} LIKE '%1.5%'"
        )
    stored = stack.sql("SELECT plan_json FROM plan_cards WHERE run_id = :r", r=run_id)[0][0]
    assert "-Infinity" in stored, stored
    # the digest as the older release computed it, over the plan as it was stored
    digest = digest_of_plan(json.loads(stored))
    for table in ("runs", "plan_cards", "plan_revisions"):
        stack.execute(f"UPDATE {table} SET plan_digest = :d WHERE run_id = :r", d=digest, r=run_id)

    shown = stack.client.get(f"/runs/{run_id}")
    assert shown.status_code == 200, shown.text
    assert shown.headers["Gatehouse-Placeholders"] == "2"
    step_input = shown.json()["plan_card"]["plan"]["steps"][0]["input"]
    assert step_input == {
        "text": "hi",
        "x": {"gatehouse:placeholder": "non-finite number", "stored": "Infinity"},
        "y": {"gatehouse:placeholder": "non-finite number", "stored": "-Infinity"},
    }
    for path in (f"/runs/{run_id}/wait?timeout_s=0.1", "/runs", f"/runs/{run_id}/episodes"):
        assert stack.client.get(path).status_code == 200, path
    page = _login(stack, "bob").get(f"/dashboard/runs/{run_id}")
    assert page.status_code == 200
    assert "non-finite number" in page.text and "Infinity" in page.text

    assert shown.json()["plan_card"]["plan_digest"] == digest
    approve = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert approve.status_code == 422, approve.text
    assert error_of(approve)["code"] == "plan_invalid"
    assert stack.sql("SELECT COUNT(*) FROM plan_approvals WHERE run_id = :r", r=run_id) == [(0,)]
    reject = stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest})
    assert reject.status_code == 200, reject.text
    assert stack.wait(run_id, {"rejected", "failed"})["status"] == "rejected"
