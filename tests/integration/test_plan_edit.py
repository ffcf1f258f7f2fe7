"""Edit before approve: an approver edits a waiting plan; the plan it came from is
rejected, the edit is gated again and waits on a run of its own, linked to where it
came from, for a decision by a third person (neither its editor nor the submitter).
Dropping steps is how a person approves part of a plan. Both databases."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import BACKENDS, Stack, running_stack


@pytest.fixture(params=BACKENDS)
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path) as s:
        yield s


def _waiting(stack: Stack) -> tuple[str, dict[str, Any]]:
    plan = noop_plan(3, objective="three notes")
    r = stack.submit({"recipe": "echo", "objective": "three notes", "mode": "run-plan",
                      "plan": plan})  # fmt: skip
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id, plan


def _edit(stack: Stack, who: str, run_id: str, body: dict[str, Any]) -> Any:
    return stack.client.post(
        f"/runs/{run_id}/plan", json=body, headers=stack.client.people.auth(who)
    )


def _decide(stack: Stack, who: str, run_id: str, digest: str) -> Any:
    return stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": digest}, headers=stack.client.people.auth(who)
    )


def test_an_edit_is_gated_again_and_approved_by_a_third_person(stack: Stack) -> None:
    run_id, plan = _waiting(stack)
    edited = copy.deepcopy(plan)
    edited["steps"] = [edited["steps"][0]]  # approve the first step only, changed
    edited["steps"][0]["input"] = {"n": 100}
    body = {"plan": edited, "previous_digest": digest_of_plan(plan), "comment": "one is enough"}
    r = _edit(stack, "bob", run_id, body)
    assert r.status_code == 202, r.text
    child = r.json()
    assert child["parent_run_id"] == run_id and child["edited_by"] == "bob"
    assert child["plan_digest"] == digest_of_plan(edited)

    parent = stack.wait(run_id, {"rejected", "failed", "succeeded"})
    assert parent["status"] == "rejected"
    [decision] = parent["approvals"]
    assert (decision["decision"], decision["decided_by"]) == ("rejected", "bob")
    assert decision["comment"] == f"edited into run {child['run_id']}: one is enough"

    new = stack.wait(child["run_id"], {"waiting_approval", "failed"})
    assert new["status"] == "waiting_approval" and new["submitted_by"] == "alice"
    assert new["plan_card"]["plan_digest"] == child["plan_digest"]
    assert new["edited_from"] == {"run_id": run_id, "plan_digest": digest_of_plan(plan),
                                  "edited_by": "bob"}  # fmt: skip
    mine = _decide(stack, "bob", child["run_id"], child["plan_digest"])  # its editor
    assert mine.status_code == 403 and mine.json()["error"]["code"] == "four_eyes"
    assert "bob edited" in mine.json()["error"]["message"]
    ok = _decide(stack, "ann", child["run_id"], child["plan_digest"])  # a third person
    assert ok.status_code == 200, ok.text
    done = stack.wait(child["run_id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded"
    assert [s["step_id"] for s in done["steps"]] == ["s1"]
    assert stack.client.get(f"/runs/{run_id}/ledger").json()["calls"] == []  # nothing ran there


def test_an_edit_that_cannot_be_taken_is_refused_and_changes_nothing(stack: Stack) -> None:
    run_id, plan = _waiting(stack)
    digest = digest_of_plan(plan)
    bad = copy.deepcopy(plan)
    bad["steps"][0]["connector_id"] = "no-such-connector"
    refusals = [
        ("alice", {"plan": plan | {"objective": "x"}, "previous_digest": digest}, 403, "forbidden"),
        ("bob", {"plan": plan | {"objective": "x"}, "previous_digest": "0" * 64}, 409,
         "stale_plan_digest"),
        ("bob", {"plan": plan, "previous_digest": digest}, 422, "invalid_request"),
        ("bob", {"plan": bad, "previous_digest": digest}, 422, "unknown_connector"),
    ]  # fmt: skip
    for who, body, status, code in refusals:
        r = _edit(stack, who, run_id, body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (who, r.text)
    assert stack.run(run_id)["status"] == "waiting_approval"
    assert stack.run(run_id)["approvals"] == []
    assert stack.sql("SELECT COUNT(*) FROM plan_edits")[0][0] == 0
    assert _decide(stack, "ann", run_id, digest).status_code == 200
    late = _edit(
        stack, "bob", run_id, {"plan": plan | {"objective": "x"}, "previous_digest": digest}
    )
    assert late.status_code == 409
    assert late.json()["error"]["code"] in ("run_not_awaiting_approval", "already_decided")


def test_an_approver_edits_from_the_run_page(stack: Stack) -> None:
    import json

    from fastapi.testclient import TestClient

    from shim.api.dashboard.session import csrf_of

    run_id, plan = _waiting(stack)
    browser = TestClient(stack.client.app, follow_redirects=False)
    token = stack.client.people.tokens["bob"]
    browser.post("/dashboard/login", data={"token": token})
    page = browser.get(f"/dashboard/runs/{run_id}").text
    assert (
        'id="edit"' in page and 'id="edited-from"' not in page and "Submit the edited plan" in page
    )
    edited = copy.deepcopy(plan)
    edited["steps"] = edited["steps"][:2]
    form = {"csrf": csrf_of(token), "previous_digest": digest_of_plan(plan),
            "plan": json.dumps(edited), "comment": "two"}  # fmt: skip
    r = browser.post(f"/dashboard/runs/{run_id}/edit", data=form)
    assert r.status_code == 303, r.text
    new_id = r.headers["location"].split("/dashboard/runs/")[1].split("?")[0]
    assert stack.wait(new_id, {"waiting_approval"})["plan_card"]["plan_digest"] == digest_of_plan(
        edited
    )
    assert (
        f'Edited by bob from <a href="/dashboard/runs/{run_id}">'
        in browser.get(f"/dashboard/runs/{new_id}").text
    )
    broken = browser.post(f"/dashboard/runs/{new_id}/edit",
                          data={**form, "plan": "{not json"})  # fmt: skip
    assert broken.status_code in (403, 422)  # bob edited it: four-eyes, or the JSON first


def test_an_expired_plan_takes_no_edit(stack: Stack) -> None:
    """An edit is a decision: past the plan's deadline it is refused, even before the
    expiry sweep has ended the run, so an edit cannot revive an expired plan."""
    import time

    run_id, plan = _waiting(stack)
    deadline = time.monotonic() + 30
    while not stack.sql("SELECT 1 FROM runs WHERE run_id = :r AND parked_until IS NOT NULL",
                        r=run_id):  # fmt: skip
        assert time.monotonic() < deadline, "the run never parked"
        time.sleep(0.05)
    stack.execute(
        "UPDATE runs SET parked_until = '2000-01-01T00:00:00.000Z' WHERE run_id = :r", r=run_id
    )
    changed = {"plan": plan | {"objective": "revived"}, "previous_digest": digest_of_plan(plan)}
    late = _edit(stack, "bob", run_id, changed)
    assert late.status_code in (408, 409), late.text
    assert late.json()["error"]["code"] in ("approval_timeout", "run_not_awaiting_approval")
    assert stack.sql("SELECT COUNT(*) FROM plan_edits")[0][0] == 0
