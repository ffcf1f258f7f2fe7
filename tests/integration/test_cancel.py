"""Cancelling a run: while it waits, between its steps, through DBOS, and racing an approval.

Runs on both backends. A cancel is one ``run_cancels`` row the database
decides against decisions; the run ends ``cancelled`` through its normal
finish (trace digest, summary episode), its DBOS workflow ends CANCELLED,
and every cancelled run replays to its recorded trace digest (the stack's
teardown replays them all).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from dbos import DBOSClient
from dbos._serialization import DBOSPortableJSON

from tests.integration.test_approval import HeldService, decide, echo_intent, waiting_run
from tests.support.mova import Upstream, load_upstream, vendor_errors
from tests.support.stack import Stack, run_workflow_status, wait_workflow_status


def cancel(stack: Stack, run_id: str, reason: str | None = None, by: str = "alice") -> Any:
    body = {"reason": reason} if reason else {}
    return stack.client.post(f"/runs/{run_id}/cancel", json=body, headers=stack.auth(by))


def dbos_status(run_id: str) -> str | None:
    return run_workflow_status(run_id)


def episodes(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    r = stack.client.get(f"/runs/{run_id}/episodes")
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["episodes"]
    return found


def mova_problems(body: dict[str, Any]) -> list[str]:
    problems = [f"vendor: {p}" for p in vendor_errors(body)]
    shared = Path(__file__).resolve().parents[3] / "shared"
    if (shared / "mova-4.1.1").is_dir():
        upstream: Upstream = load_upstream(shared)
        problems += [f"upstream: {p}" for p in upstream.errors(body)]
    return problems


def test_cancel_a_waiting_run(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)

    r = cancel(stack, run_id, reason="wrong objective")
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["recorded"] is True
    assert answer["cancelled_by"] == "alice"
    assert answer["reason"] == "wrong objective"
    assert answer["source"] == "gatehouse"

    done = stack.wait(run_id, {"cancelled", "succeeded", "failed", "rejected"})
    assert done["status"] == "cancelled", done
    assert done["error_code"] == "run_cancelled"
    assert "alice" in done["error_message"] and "wrong objective" in done["error_message"]
    assert done["steps"] == []
    assert done["trace_digest"] is not None
    assert wait_workflow_status(run_id, "CANCELLED") == "CANCELLED"
    # only the planner's own ledger row: nothing ran
    assert stack.sql("SELECT kind, step_id FROM calls WHERE run_id = :r", r=run_id) == [
        ("provider", "@compile")
    ]

    # idempotent: the cancellation on record, not a second one
    again = cancel(stack, run_id, reason="another reason", by="olga")
    assert again.status_code == 200, again.text
    assert again.json() | {"recorded": True} == answer | {"status": "cancelled"}
    assert again.json()["recorded"] is False

    # an approval after the cancel is refused and leaves no row
    late = decide(stack, "approve", run_id, digest)
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "run_cancelled"
    assert stack.sql("SELECT COUNT(*) FROM plan_approvals WHERE run_id = :r", r=run_id) == [(0,)]

    found = episodes(stack, run_id)
    by_type = {e["episode_type"]: e for e in found}
    request = by_type["execution/cancel_request"]["body"]["result_details"]
    assert (request["cancelled_by"], request["reason"]) == ("alice", "wrong objective")
    stop = by_type["execution/cancel"]
    assert stop["result_status"] == "cancelled"
    assert stop["body"]["result_details"]["at"] == "@approval"
    assert by_type["execution/run_summary"]["result_status"] == "cancelled"
    for e in found:
        assert mova_problems(e["body"]) == [], e["episode_type"]


def test_cancel_a_finished_run_is_refused(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)
    assert decide(stack, "approve", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    assert wait_workflow_status(run_id, "SUCCESS") == "SUCCESS"

    r = cancel(stack, run_id)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "run_already_finished"
    assert r.json()["error"]["details"] == {"status": "succeeded"}
    assert stack.sql("SELECT COUNT(*) FROM run_cancels WHERE run_id = :r", r=run_id) == [(0,)]

    rejected_id, rejected_digest = waiting_run(stack)
    assert decide(stack, "reject", rejected_id, rejected_digest, by="ann").status_code == 200
    r = cancel(stack, rejected_id)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "run_already_finished"
    assert stack.wait(rejected_id, {"rejected", "cancelled"})["status"] == "rejected"


def test_who_may_cancel(stack: Stack) -> None:
    run_id, _digest = waiting_run(stack)  # submitted by alice
    # ann is only an approver; sam submits, but not this run
    for who in ("ann", "sam"):
        r = cancel(stack, run_id, by=who)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "forbidden"
    # a body naming someone else is refused
    r = stack.client.post(
        f"/runs/{run_id}/cancel", json={"cancelled_by": "bob"}, headers=stack.auth("olga")
    )
    assert r.status_code == 403, r.text
    assert stack.sql("SELECT COUNT(*) FROM run_cancels WHERE run_id = :r", r=run_id) == [(0,)]
    # olga operates: any run
    r = cancel(stack, run_id, by="olga")
    assert r.status_code == 200, r.text
    assert r.json()["cancelled_by"] == "olga"
    assert stack.wait(run_id, {"cancelled", "failed"})["status"] == "cancelled"

    unknown = "run_" + uuid.uuid4().hex
    r = cancel(stack, unknown, by="olga")
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "run_not_found"


def test_cancel_between_steps(stack: Stack) -> None:
    """The run is held inside its second step; the cancel lands; the third never runs."""
    with HeldService() as held:
        plan = {
            "objective": "Three steps, held in the middle",
            "steps": [
                {
                    "step_id": "first",
                    "verb": "note",
                    "connector_id": "note",
                    "driver_kind": "noop",
                    "input": {"message": "one"},
                },
                held.step(),
                {
                    "step_id": "third",
                    "verb": "note",
                    "connector_id": "note",
                    "driver_kind": "noop",
                    "input": {"message": "three"},
                },
            ],
        }
        r = stack.submit(echo_intent(mode="run-plan") | {"plan": plan})
        assert r.status_code == 202, r.text
        run = stack.wait(r.json()["run_id"], {"waiting_approval", "failed"})
        run_id = run["run_id"]
        assert decide(stack, "approve", run_id, run["plan_digest"]).status_code == 200
        assert held.arrived.wait(timeout=30), "the approved run never reached its held step"

        c = cancel(stack, run_id, reason="stop after this step")
        assert c.status_code == 200, c.text
        assert c.json()["status"] == "cancelling"
        held.release.set()
        done = stack.wait(run_id, {"cancelled", "succeeded", "failed"})

    assert done["status"] == "cancelled", done
    assert [(s["step_id"], s["status"]) for s in done["steps"]] == [
        ("first", "succeeded"),
        ("hold", "succeeded"),
    ]
    # no call for the third step was ever made
    assert stack.sql(
        "SELECT step_id FROM calls WHERE run_id = :r AND kind = 'tool' ORDER BY step_id", r=run_id
    ) == [("first",), ("hold",)]
    stop = next(e for e in episodes(stack, run_id) if e["episode_type"] == "execution/cancel")
    assert stop["body"]["result_details"]["at"] == "third"
    assert wait_workflow_status(run_id, "CANCELLED") == "CANCELLED"


def _dbos_cancel(stack: Stack, workflow_id: str) -> None:
    client = DBOSClient(system_database_url=stack.database_url, serializer=DBOSPortableJSON)
    try:
        client.cancel_workflow(workflow_id)
    finally:
        client.destroy()


def test_a_waiting_run_has_no_workflow_for_dbos_to_cancel(stack: Stack) -> None:
    """A run waiting for a decision is rows only: its first stretch ended SUCCESS
    when it parked, so ``dbos workflow cancel`` finds nothing to stop, and the run
    still takes its decision (Gatehouse's own cancel is the way to stop it)."""
    run_id, digest = waiting_run(stack)
    assert wait_workflow_status(run_id, "SUCCESS") == "SUCCESS"
    _dbos_cancel(stack, run_id)
    assert dbos_status(run_id) == "SUCCESS"
    assert decide(stack, "approve", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"succeeded", "failed", "cancelled"})["status"] == "succeeded"
    assert wait_workflow_status(run_id, "SUCCESS") == "SUCCESS"


def test_a_cancel_through_dbos_ends_the_run_the_same_way(stack: Stack) -> None:
    """``dbos workflow cancel`` (DBOSClient.cancel_workflow) of a running stretch,
    without Gatehouse's route: the run ends cancelled, source dbos."""
    with HeldService() as held:
        plan = {
            "objective": "Held in its only step, then cancelled through DBOS",
            "steps": [
                held.step(),
            ],
        }
        r = stack.submit(echo_intent(mode="run-plan") | {"plan": plan})
        assert r.status_code == 202, r.text
        run = stack.wait(r.json()["run_id"], {"waiting_approval", "failed"})
        run_id = run["run_id"]
        # parked (its first stretch ended): the approval hands the run to stretch 1. An
        # approval that beat the park would be read by the first stretch itself, and
        # cancelling RUN_ID:1 would then stop nothing.
        assert wait_workflow_status(run_id, "SUCCESS") == "SUCCESS"
        assert decide(stack, "approve", run_id, run["plan_digest"]).status_code == 200
        assert held.arrived.wait(timeout=30), "the approved run never reached its held step"
        assert stack.sql("SELECT stretch FROM runs WHERE run_id = :r", r=run_id) == [(1,)]
        _dbos_cancel(stack, f"{run_id}:1")  # the stretch after the approval
        held.release.set()
        done = stack.wait(run_id, {"cancelled", "succeeded", "failed"}, timeout=30)

    assert done["status"] == "cancelled", done
    assert done["error_code"] == "run_cancelled"
    assert dbos_status(run_id) == "CANCELLED"
    stop = next(e for e in episodes(stack, run_id) if e["episode_type"] == "execution/cancel")
    details = stop["body"]["result_details"]
    assert (details["cancelled_by"], details["source"]) == ("dbos", "dbos")
    assert mova_problems(stop["body"]) == []
    # Gatehouse's own cancel now answers with the one on record
    again = cancel(stack, run_id)
    assert again.status_code == 200, again.text
    assert (again.json()["status"], again.json()["source"]) == ("cancelled", "dbos")


def _race(stack: Stack, run_id: str, digest: str) -> tuple[Any, Any]:
    answers: dict[str, Any] = {}
    start = threading.Barrier(2)

    def go(name: str) -> None:
        start.wait()
        if name == "approve":
            answers[name] = decide(stack, "approve", run_id, digest)
        else:
            answers[name] = cancel(stack, run_id, reason="race")

    threads = [threading.Thread(target=go, args=(n,)) for n in ("approve", "cancel")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers["approve"], answers["cancel"]


def test_fifty_cancel_approve_races_each_end_one_way(stack: Stack) -> None:
    """Whichever commits first wins; the other sees it. Batches of 4: a waiting run
    holds one of the worker's 4 queue slots."""
    outcomes: dict[str, int] = {"cancel_first": 0, "approve_first": 0}
    for _batch in range(13):
        waiting = [waiting_run(stack) for _ in range(4 if _batch < 12 else 2)]
        results = []
        for run_id, digest in waiting:
            approve, stop = _race(stack, run_id, digest)
            results.append((run_id, approve, stop))
        for run_id, approve, stop in results:
            done = stack.wait(run_id, {"cancelled", "succeeded", "failed", "rejected"})
            rows = stack.sql("SELECT decision FROM plan_approvals WHERE run_id = :r", r=run_id)
            steps = stack.sql("SELECT COUNT(*) FROM run_steps WHERE run_id = :r", r=run_id)[0][0]
            if approve.status_code == 409:
                # the cancel committed first: no approval row, nothing ran
                assert approve.json()["error"]["code"] == "run_cancelled", approve.text
                assert stop.status_code == 200, stop.text
                assert rows == [] and steps == 0
                assert done["status"] == "cancelled", done
                outcomes["cancel_first"] += 1
            else:
                # the approval committed first; the cancel then stops the run at its
                # next boundary (here: before its only step), or finds it finished
                assert approve.status_code == 200, approve.text
                assert rows == [("approved",)]
                if stop.status_code == 200:
                    assert done["status"] == "cancelled", done
                else:
                    assert stop.json()["error"]["code"] == "run_already_finished", stop.text
                    assert done["status"] == "succeeded", done
                outcomes["approve_first"] += 1
            want = "CANCELLED" if done["status"] == "cancelled" else "SUCCESS"
            assert wait_workflow_status(run_id, want) == want
    assert sum(outcomes.values()) == 50, outcomes
