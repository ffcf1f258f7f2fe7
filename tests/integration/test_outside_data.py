"""Outside data decided on once it exists (``approval.reapprove_outside_data``), on
SQLite and PostgreSQL.

A plan fetches JSON over HTTP, then a note takes that body (``input_from``): the
approver of the plan saw only where the value would come from. Under a profile
that asks for it, the run parks again right before the note, with a new revision
of the plan on the card whose note has the fetched value written in; that
revision has its own digest, the first approval does not cover it, and nothing
is sent until a person decides on it. A rejection there ends the run with the
note never run. The profile is an operator's own (``GATEHOUSE_EXTRA_POLICIES``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shim.local import InventoryService
from tests.support.extra_policies import extra_policies, write_profile
from tests.support.plans import digest_of_plan
from tests.support.stack import Stack, running_stack

PROFILE = "reviewed-data"


@pytest.fixture(scope="module")
def reviewed(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, InventoryService]]:
    root = tmp_path_factory.mktemp(f"outside-data-{backend}")
    write_profile(root / "policies", PROFILE, approval={"reapprove_outside_data": True})
    (root / "stack").mkdir()
    with (
        InventoryService() as inventory,
        extra_policies(root / "policies"),
        running_stack(backend, root / "stack") as stack,
    ):
        yield stack, inventory


def _plan(inventory: InventoryService) -> dict[str, Any]:
    return {
        "objective": "Note what the service said",
        "steps": [
            {
                "step_id": "fetch",
                "verb": "fetch",
                "connector_id": "local-http",
                "driver_kind": "http",
                "input": {"method": "GET", "url": f"{inventory.base_url}/status"},
            },
            {
                "step_id": "keep",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input_from": {"step_id": "fetch", "pointer": "/json"},
            },
        ],
    }


def _decide(stack: Stack, verb: str, run_id: str, digest: str) -> Any:
    return stack.client.post(
        f"/{verb}/{run_id}", json={"plan_digest": digest}, headers=stack.auth("bob")
    )


def _second_wait(stack: Stack, run_id: str, first: str) -> dict[str, Any]:
    """The run parked again, on a revision other than ``first``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = stack.run(run_id)
        if run["status"] == "waiting_approval" and run["plan_digest"] != first:
            return run
        assert run["status"] in ("waiting_approval", "running", "queued"), run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} never parked on a second revision: {stack.run(run_id)}")


def _park_on_the_value(
    stack: Stack, inventory: InventoryService
) -> tuple[str, str, dict[str, Any]]:
    """Submit, approve the plan as proposed, and come back parked on the written-in
    value: (run_id, the first digest, the run as it waits again)."""
    plan = _plan(inventory)
    body = {"recipe": "echo", "objective": "outside data", "mode": "run-plan", "plan": plan}
    r = stack.submit(body | {"policy_profile": PROFILE})
    assert r.status_code == 202, r.text
    run_id, first = str(r.json()["run_id"]), digest_of_plan(plan)
    stack.wait(run_id, {"waiting_approval"})
    approved = _decide(stack, "approve", run_id, first)
    assert approved.status_code == 200, approved.text
    return run_id, first, _second_wait(stack, run_id, first)


def test_the_value_is_written_into_a_revision_a_person_approves(
    reviewed: tuple[Stack, InventoryService],
) -> None:
    stack, inventory = reviewed
    before = inventory.count("/status")  # the module's runs share the service
    run_id, first, waiting = _park_on_the_value(stack, inventory)
    card = waiting["plan_card"]
    [fetch, keep] = card["plan"]["steps"]
    assert fetch["input"]["url"].endswith("/status")
    assert keep["input"] == {"status": "ok"} and keep.get("input_from") is None
    second = waiting["plan_digest"]
    assert second == card["plan_digest"] != first
    assert inventory.count("/status") == before + 1  # not fetched again for the revision
    # the approval of the plan as proposed does not cover the value
    stale = _decide(stack, "approve", run_id, first)
    assert stale.status_code == 409, stale.text
    assert _decide(stack, "approve", run_id, second).status_code == 200
    done = stack.wait(run_id, {"succeeded", "failed", "rejected"})
    assert done["status"] == "succeeded", done
    assert [(s["step_id"], s["status"]) for s in done["steps"]] == [
        ("fetch", "succeeded"),
        ("keep", "succeeded"),
    ]
    assert inventory.count("/status") == before + 1
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    [revised] = [
        e["body"]
        for e in episodes
        if e["episode_type"] == "plan/agent_plan"
        and e["body"]["result_details"]["plan_digest"] == second
    ]
    assert revised["result_details"]["outside_data"] == "keep"
    assert "with the outside data step 'keep' takes" in revised["result_summary"]
    changed = revised["result_details"]["changes"]
    assert [c["after"]["input"] for c in changed] == [{"status": "ok"}], changed
    # the run replays from its ledger through both revisions
    replayed = stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("olga"))
    assert replayed.status_code == 200 and replayed.json()["match"] is True, replayed.text


def test_a_value_rejected_is_never_used(reviewed: tuple[Stack, InventoryService]) -> None:
    stack, inventory = reviewed
    run_id, _first, waiting = _park_on_the_value(stack, inventory)
    assert _decide(stack, "reject", run_id, waiting["plan_digest"]).status_code == 200
    done = stack.wait(run_id, {"succeeded", "failed", "rejected"})
    assert done["status"] == "rejected", done
    assert [s["step_id"] for s in done["steps"]] == ["fetch"]


def test_the_card_says_the_value_will_be_put_to_a_person(
    reviewed: tuple[Stack, InventoryService],
) -> None:
    stack, inventory = reviewed
    plan = _plan(inventory)
    # the value goes into a request's body this time: its request is not known yet
    plan["steps"][1] = {
        "step_id": "send",
        "verb": "write",
        "connector_id": "local-http",
        "driver_kind": "http",
        "input": {"method": "POST", "url": f"{inventory.base_url}/status"},
        "input_from": {"step_id": "fetch", "pointer": "/json", "into": "/json"},
    }
    body = {"recipe": "echo", "objective": "outside data", "mode": "run-plan", "plan": plan}
    r = stack.submit(body | {"policy_profile": PROFILE})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    browser = TestClient(stack.client.app, follow_redirects=False)
    login = {"token": stack.client.people.tokens["bob"], "next": "/dashboard"}
    assert browser.post("/dashboard/login", data=login).status_code == 303
    page = browser.get(f"/dashboard/runs/{run_id}")
    assert page.status_code == 200, page.text
    assert "put to a person with the value written in before it is sent" in page.text
    assert _decide(stack, "reject", run_id, digest_of_plan(plan)).status_code == 200
    assert stack.wait(run_id, {"rejected", "failed"})["status"] == "rejected"
