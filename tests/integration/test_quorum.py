"""Quorum: under the shipped ``two-person`` profile a plan that can change anything
needs two distinct approvers (neither its submitter) before a step runs; an
approval short of it is counted and the run keeps waiting; one rejection denies it;
a read-only plan needs one. Both databases."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.receivers import WebhookReceiver
from tests.support.stack import BACKENDS, Stack, running_stack


@pytest.fixture(params=BACKENDS)
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path) as s:
        yield s


def _changing_plan(url: str) -> dict[str, Any]:
    return {"schema_id": "env.mova_agent_plan_v1", "objective": "post once", "steps": [
        {"step_id": "post", "verb": "write", "connector_id": "local-http", "driver_kind": "http",
         "input": {"url": url, "method": "POST", "json": {"n": 1}}}]}  # fmt: skip


def _submit(stack: Stack, plan: dict[str, Any]) -> str:
    body = {"recipe": "echo", "objective": "quorum", "mode": "run-plan", "plan": plan,
            "policy_profile": "two-person"}  # fmt: skip
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id


def _decide(stack: Stack, who: str, run_id: str, digest: str, verb: str = "approve") -> Any:
    return stack.client.post(
        f"/{verb}/{run_id}", json={"plan_digest": digest}, headers=stack.client.people.auth(who)
    )


def test_a_changing_plan_runs_only_once_two_people_approved_it(stack: Stack) -> None:
    with WebhookReceiver() as hook:
        plan = _changing_plan(f"{hook.url}/effect")
        digest = digest_of_plan(plan)
        run_id = _submit(stack, plan)
        first = _decide(stack, "bob", run_id, digest)
        assert first.status_code == 200, first.text
        assert first.json()["quorum"] == {"needed": 2, "approved_by": ["bob"]}
        assert first.json()["recorded"] is True
        again = _decide(stack, "bob", run_id, digest)  # the same person twice counts once
        assert again.json()["recorded"] is False
        assert again.json()["quorum"]["approved_by"] == ["bob"]
        own = _decide(stack, "alice", run_id, digest)  # its submitter (and no approver)
        assert own.status_code == 403
        time.sleep(1.0)  # a worker would have run the step by now, were it approved
        view = stack.run(run_id)
        assert view["status"] == "waiting_approval" and view["approvals"] == []
        assert view["quorum"] == {"needed": 2, "approved_by": ["bob"]}
        assert hook.on("/effect") == []

        second = _decide(stack, "ann", run_id, digest)
        assert second.status_code == 200, second.text
        assert second.json()["quorum"] == {"needed": 2, "approved_by": ["bob", "ann"]}
        assert second.json()["decided_by"] == "ann" and second.json()["recorded"] is True
        assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
        assert len(hook.on("/effect")) == 1
        view = stack.run(run_id)
        assert [(a["decision"], a["decided_by"]) for a in view["approvals"]] == [
            ("approved", "ann")]  # fmt: skip
        assert view["quorum"]["approved_by"] == ["bob", "ann"]
        late = _decide(stack, "max", run_id, digest, "reject")
        assert late.json()["error"]["code"] == "already_decided"


def test_one_rejection_denies_a_plan_short_of_its_quorum(stack: Stack) -> None:
    plan = _changing_plan("http://127.0.0.1:9/never")
    digest = digest_of_plan(plan)
    run_id = _submit(stack, plan)
    assert _decide(stack, "bob", run_id, digest).json()["quorum"]["approved_by"] == ["bob"]
    no = _decide(stack, "ann", run_id, digest, "reject")
    assert no.status_code == 200 and no.json()["decision"] == "rejected"
    assert stack.wait(run_id, {"rejected"})["status"] == "rejected"
    assert stack.client.get(f"/runs/{run_id}/ledger").json()["calls"] == []


def test_a_read_only_plan_needs_one_approver(stack: Stack) -> None:
    plan = noop_plan(1)
    run_id = _submit(stack, plan)
    ok = _decide(stack, "bob", run_id, digest_of_plan(plan))
    assert ok.status_code == 200 and ok.json()["quorum"] is None
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
