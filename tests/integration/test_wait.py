"""``GET /runs/{run_id}/wait``: a client waits on a run instead of polling it."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from tests.support.stack import Stack


def _submit(stack: Stack) -> str:
    body = {
        "recipe": "echo",
        "objective": "wait for me",
        "parameters": {"nonce": uuid.uuid4().hex},
        "mode": "full-cycle",
    }
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def _wait(stack: Stack, run_id: str, **params: Any) -> Any:
    return stack.client.get(f"/runs/{run_id}/wait", params=params)


def test_default_wait_answers_at_the_plan_card(stack: Stack) -> None:
    run_id = _submit(stack)
    r = _wait(stack, run_id, timeout_s=30)
    assert r.status_code == 200, r.text
    assert r.headers["Gatehouse-Wait"] == "reached"
    run = r.json()
    assert run["status"] == "waiting_approval"
    assert run["plan_card"] is not None  # written with the status, in one commit
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": run["plan_digest"]})
    # until the worker has taken the decision, the run still waits for one
    assert _wait(stack, run_id, until="rejected", timeout_s=30).json()["status"] == "rejected"


def test_a_decision_wakes_a_waiting_client(stack: Stack) -> None:
    run_id = _submit(stack)
    digest = _wait(stack, run_id, timeout_s=30).json()["plan_digest"]
    answers: list[Any] = []
    waiter = threading.Thread(
        target=lambda: answers.append(_wait(stack, run_id, until="succeeded", timeout_s=30))
    )
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # still waiting: nothing has happened yet
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert r.status_code == 200, r.text
    waiter.join(timeout=40)
    assert answers and answers[0].status_code == 200, answers
    assert answers[0].headers["Gatehouse-Wait"] == "reached"
    assert answers[0].json()["status"] == "succeeded"


def test_a_wait_times_out_with_the_run_as_it_stands(stack: Stack) -> None:
    run_id = _submit(stack)
    digest = _wait(stack, run_id, timeout_s=30).json()["plan_digest"]
    started = time.monotonic()
    r = _wait(stack, run_id, until="succeeded", timeout_s=0.3)
    assert time.monotonic() - started >= 0.3
    assert r.status_code == 200, r.text
    assert r.headers["Gatehouse-Wait"] == "timeout"
    assert r.json()["status"] == "waiting_approval"
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest})
    # a finished run answers at once, whatever the client waits for
    r = _wait(stack, run_id, until="needs_operator", timeout_s=30)
    assert r.headers["Gatehouse-Wait"] == "reached"
    assert r.json()["status"] == "rejected"


def test_bad_waits_are_refused_with_a_reason(stack: Stack) -> None:
    run_id = _submit(stack)
    r = _wait(stack, run_id, until="waiting_approval,bogus")
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_request"
    assert "bogus" in error["message"] and "waiting_approval" in error["message"]
    for bad in (0, 61, "soon"):
        r = _wait(stack, run_id, timeout_s=bad)
        assert r.status_code == 422 and "timeout_s" in r.text, r.text
    assert _wait(stack, "run_" + "0" * 32).json()["error"]["code"] == "run_not_found"
    # a submitter waits only on its own runs, as it reads only its own
    r = stack.client.get(f"/runs/{run_id}/wait", headers=stack.auth("sam"))
    assert r.status_code == 403, r.text
    run = _wait(stack, run_id, timeout_s=30).json()
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": run["plan_digest"]})
