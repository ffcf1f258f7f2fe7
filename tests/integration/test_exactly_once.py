"""Attempts, replay and fork, on SQLite and PostgreSQL (in-process worker).

* A call that certainly did not take effect (503) is retried as a new attempt
  with a new op_key; the callee sees a new Idempotency-Key.
* Replay serves every call from the ledger: the trace digest comes out the
  same, with no outbound connection; a changed request is a divergence that
  names the step and both digests.
* A fork reuses the parent's results before its step and calls live after.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contracts import Plan, digest_of
from shim.local import InventoryService
from tests.support.flaky import FlakyService
from tests.support.guard import network_guard
from tests.support.stack import Stack


def _run_plan(stack: Stack, steps: list[dict[str, Any]]) -> str:
    plan = {"objective": "exactly once", "steps": steps}
    r = stack.submit({"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    assert stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
    return run_id


def _note(step_id: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"text": step_id},
    }


def _get(step_id: str, url: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "fetch",
        "connector_id": "local-http",
        "driver_kind": "http",
        "input": {"url": url},
    }


def _calls(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    r = stack.client.get(f"/runs/{run_id}/ledger")
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["calls"]
    return out


# ------------------------------------------------------------------ attempts
def test_a_retry_after_failure_is_a_new_attempt_with_a_new_op_key(stack: Stack) -> None:
    with FlakyService(failures=1) as flaky:
        run_id = _run_plan(stack, [_get("fetch", flaky.url)])
        done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    rows = sorted(_calls(stack, run_id), key=lambda c: c["attempt"])
    assert [(c["attempt"], c["status"], c["error_code"]) for c in rows] == [
        (1, "failed", "upstream_unavailable"),
        (2, "completed", None),
    ]
    assert rows[0]["op_key"] != rows[1]["op_key"]
    assert flaky.keys == [rows[0]["op_key"], rows[1]["op_key"]]  # a new key per attempt
    assert done["steps"][0]["op_key"] == rows[1]["op_key"]


def test_attempts_stop_at_the_profiles_limit(stack: Stack) -> None:
    with FlakyService(failures=10) as flaky:
        run_id = _run_plan(stack, [_get("fetch", flaky.url)])
        done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "failed"
    assert done["error_code"] == "upstream_unavailable"
    assert len(flaky.keys) == 3 == len(set(flaky.keys))  # default max_attempts 3


# ------------------------------------------------------------------ replay
def test_replay_reproduces_the_trace_digest_without_calling_out(stack: Stack) -> None:
    from ledger import open_database
    from worker.replay import replay_run
    from worker.runtime import runtime

    with InventoryService() as inventory:
        run_id = _run_plan(
            stack, [_note("first"), _get("fetch", f"{inventory.base_url}/inventory.json")]
        )
        done = stack.wait(run_id, {"succeeded", "failed"})
        assert done["status"] == "succeeded"
        assert done["trace_digest"] is not None
        before = inventory.count("/inventory.json")

        db = open_database(stack.database_url)
        try:
            with network_guard() as attempts:
                report = replay_run(db, runtime().settings, run_id)
                # the guard is real: a direct call is refused and seen
                with pytest.raises(httpx.ConnectError):
                    httpx.get(f"{inventory.base_url}/status", timeout=2)
        finally:
            db.dispose()
        assert len(attempts) == 1  # only the control call above
        assert inventory.count("/inventory.json") == before  # the replay sent nothing

    assert report.match is True, report
    assert report.replayed_trace_digest == report.recorded_trace_digest == done["trace_digest"]
    assert report.calls == 2
    assert report.outbound_calls == 0

    # the same through the API (a worker answers the queued replay)
    r = stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("olga"))
    assert r.status_code == 200, r.text
    assert r.json()["match"] is True
    assert r.json()["replayed_trace_digest"] == done["trace_digest"]
    assert stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("sam")).status_code == 403


def test_replay_names_the_step_whose_request_changed(stack: Stack) -> None:
    run_id = _run_plan(stack, [_note("first"), _note("second")])
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    second = next(c for c in _calls(stack, run_id) if c["step_id"] == "second")
    stack.execute(
        "UPDATE calls SET request_digest = :d WHERE op_key = :k", d="0" * 64, k=second["op_key"]
    )
    r = stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("olga"))
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["match"] is False
    [divergence] = report["divergences"]
    assert divergence["kind"] == "request_digest"
    assert divergence["step_id"] == "second"
    assert divergence["op_key"] == second["op_key"]
    assert divergence["recorded_digest"] == "0" * 64
    assert divergence["replayed_digest"] == second["request_digest"]


def test_replay_refuses_an_unfinished_run(stack: Stack) -> None:
    plan = {"objective": "wait", "steps": [_note("only")]}
    r = stack.submit({"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan})
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    r = stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("olga"))
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "run_not_finished"
    stack.client.post(
        f"/reject/{run_id}",
        json={"plan_digest": digest_of(Plan.model_validate(plan).model_dump(mode="json"))},
    )
    stack.wait(run_id, {"rejected"})


# ------------------------------------------------------------------ fork
def test_fork_reuses_results_before_its_step_and_calls_live_after(stack: Stack) -> None:
    with InventoryService() as inventory:
        url = f"{inventory.base_url}/inventory.json"
        parent = _run_plan(stack, [_note("first"), _get("fetch", url), _note("last")])
        assert stack.wait(parent, {"succeeded", "failed"})["status"] == "succeeded"
        assert inventory.count("/inventory.json") == 1

        r = stack.client.post(
            f"/runs/{parent}/fork", json={"from_step": 2}, headers=stack.auth("bob")
        )
        assert r.status_code == 202, r.text
        child = r.json()["run_id"]
        assert r.json()["parent_run_id"] == parent
        # A new execution needs a new decision: on a plan card of its own, the
        # parent's plan, decided by neither the fork's requester nor the submitter.
        card = stack.wait(child, {"waiting_approval", "failed"})
        assert card["status"] == "waiting_approval", card
        assert card["plan_digest"] == stack.run(parent)["plan_digest"]
        assert inventory.count("/inventory.json") == 1  # nothing ran before the decision
        body = {"plan_digest": card["plan_digest"]}
        refused = stack.client.post(f"/approve/{child}", json=body, headers=stack.auth("bob"))
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "four_eyes"
        assert refused.json()["error"]["details"]["requested_by"] == "bob"
        ok = stack.client.post(f"/approve/{child}", json=body, headers=stack.auth("ann"))
        assert ok.status_code == 200, ok.text
        done = stack.wait(child, {"succeeded", "failed"})
        assert done["status"] == "succeeded", done
        assert inventory.count("/inventory.json") == 2  # step 2 ran live again
        assert inventory.effects("/inventory.json") == 2  # under a new key

    assert done["parent_run_id"] == parent and done["fork_from_step"] == 2
    parent_calls = {c["step_id"]: c for c in _calls(stack, parent)}
    child_calls = {c["step_id"]: c for c in _calls(stack, child)}
    assert set(child_calls) == {"fetch", "last"}  # step 1 was reused, not called
    steps = {s["step_id"]: s for s in done["steps"]}
    assert steps["first"]["op_key"] == parent_calls["first"]["op_key"]
    assert steps["fetch"]["op_key"] == child_calls["fetch"]["op_key"]
    assert steps["fetch"]["op_key"] != parent_calls["fetch"]["op_key"]
    assert done["trace_digest"] != stack.run(parent)["trace_digest"]
    episodes = stack.client.get(f"/runs/{child}/episodes").json()["episodes"]
    assert any(e["episode_type"] == "execution/fork" for e in episodes)


def test_fork_refusals(stack: Stack) -> None:
    parent = _run_plan(stack, [_note("only")])
    assert stack.wait(parent, {"succeeded", "failed"})["status"] == "succeeded"
    as_bob = stack.auth("bob")
    r = stack.client.post(f"/runs/{parent}/fork", json={"from_step": 5}, headers=as_bob)
    assert r.status_code == 422 and r.json()["error"]["code"] == "fork_step_invalid"
    r = stack.client.post(f"/runs/{parent}/fork", json={"from_step": 0}, headers=as_bob)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = stack.client.post(f"/runs/{parent}/fork", json={"from_step": 1}, headers=stack.auth("sam"))
    assert r.status_code == 403
    r = stack.client.post(f"/runs/run_{'0' * 32}/fork", json={"from_step": 1}, headers=as_bob)
    assert r.status_code == 404


# ------------------------------------------------------------------ resolution refusals
def test_only_an_in_doubt_call_can_be_resolved(stack: Stack) -> None:
    run_id = _run_plan(stack, [_note("only")])
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    [call] = _calls(stack, run_id)
    as_olga = stack.auth("olga")
    body = {"outcome": "applied"}
    r = stack.client.post(f"/calls/{call['op_key']}/resolve", json=body, headers=as_olga)
    assert r.status_code == 409 and r.json()["error"]["code"] == "call_not_in_doubt"
    assert r.json()["error"]["details"] == {"status": "completed"}
    r = stack.client.post(f"/calls/{'0' * 64}/resolve", json=body, headers=as_olga)
    assert r.status_code == 404 and r.json()["error"]["code"] == "call_not_found"
    r = stack.client.post(
        f"/calls/{call['op_key']}/resolve", json={"outcome": "maybe"}, headers=as_olga
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = stack.client.post(f"/calls/{call['op_key']}/resolve", json=body, headers=stack.auth("ann"))
    assert r.status_code == 403  # approvers do not resolve calls; operators do
    assert [c["status"] for c in _calls(stack, run_id)] == ["completed"]
