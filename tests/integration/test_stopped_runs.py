"""No run is left unfinished with no workflow to carry it on: the reaper's leader
ends every run whose current workflow DBOS will not run further, whatever DBOS
holds for it (``ledger.cancels.stopped``, ``worker.durable._cancel.end_stopped``).

Each case puts a finished run back as a run still going (``running``, not
finished) and then leaves its workflow as it is found after a death: ended in
``ERROR`` for a bug, past DBOS's recovery attempts, ``SUCCESS`` without ending
the run, or with no record at all. Each ends ``failed`` (``workflow_lost``) with
the cause as a security event, or ``cancelled`` where a person asked for a
cancel; a cancel asked of a run whose workflow waits on a queue no worker
serves ends it too. Both databases.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.stack import Stack


@pytest.fixture
def stack(tampered_stack: Stack) -> Stack:
    return tampered_stack


def _as_if_still_going(stack: Stack, run_id: str) -> str:
    """The finished run made to look as a run still executing; its last workflow's id."""
    stretch = stack.sql("SELECT stretch FROM runs WHERE run_id = :r", r=run_id)[0][0]
    stack.execute(
        "UPDATE runs SET status = 'running', phase = 'execute', finished_at = NULL"
        " WHERE run_id = :r",
        r=run_id,
    )
    return f"{run_id}:{stretch}" if stretch else run_id


def _security_events(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    r = stack.client.get(f"/runs/{run_id}/episodes")
    assert r.status_code == 200, r.text
    return [e for e in r.json()["episodes"] if e["episode_type"] == "security_event/workflow_lost"]


# What DBOS may hold for a run's workflow that will never end the run.
DEAD = {
    "error": "UPDATE {wf} SET status = 'ERROR', error = :e WHERE workflow_uuid = :w",
    "max_recovery": (
        "UPDATE {wf} SET status = 'MAX_RECOVERY_ATTEMPTS_EXCEEDED' WHERE workflow_uuid = :w"
    ),
    "success": "UPDATE {wf} SET status = 'SUCCESS' WHERE workflow_uuid = :w",
    "lost": "DELETE FROM {wf} WHERE workflow_uuid = :w",  # its steps' rows go with it
}
DEAD_STATUS = {
    "error": "ERROR",
    "max_recovery": "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
    "success": "SUCCESS",
}


@pytest.mark.parametrize("how", sorted(DEAD))
def test_a_run_whose_workflow_died_is_ended_failed(stack: Stack, how: str) -> None:
    run_id = stack.finished_run(1, f"died: {how}")
    workflow_id = _as_if_still_going(stack, run_id)
    error = '{"name": "IntegrityError", "message": "duplicate key value"}'
    stack.execute(DEAD[how].format(wf=stack.workflow_table), w=workflow_id, e=error)

    done = stack.wait(run_id, {"failed", "cancelled", "succeeded"}, timeout=30)
    assert (done["status"], done["error_code"]) == ("failed", "workflow_lost"), done
    assert workflow_id in done["error_message"]
    [event] = _security_events(stack, run_id)
    details = event["body"]["result_details"]
    assert details["workflow_id"] == workflow_id
    assert details["dbos_status"] == (None if how == "lost" else DEAD_STATUS[how])
    if how == "error":
        assert "duplicate key value" in done["error_message"]
    # it has ended: a cancel finds nothing to stop
    r = stack.client.post(f"/runs/{run_id}/cancel", json={}, headers=stack.auth("alice"))
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_already_finished"


def test_a_cancel_of_a_run_whose_workflow_died_ends_it_cancelled(stack: Stack) -> None:
    """The reported wedge: the workflow ended in ERROR, and ``cancel`` answered
    ``cancelling`` for ever. Now the cancel is what the run ends with."""
    run_id = stack.finished_run(1, "died, then cancelled")
    workflow_id = _as_if_still_going(stack, run_id)
    stack.execute(
        f"UPDATE {stack.workflow_table} SET status = 'ERROR' WHERE workflow_uuid = :w",
        w=workflow_id,
    )
    r = stack.client.post(
        f"/runs/{run_id}/cancel", json={"reason": "stuck"}, headers=stack.auth("alice")
    )
    assert r.status_code in (200, 202), r.text
    done = stack.wait(run_id, {"failed", "cancelled", "succeeded"}, timeout=30)
    assert (done["status"], done["error_code"]) == ("cancelled", "run_cancelled"), done
    assert "alice" in done["error_message"]
    assert _security_events(stack, run_id) == []


def test_a_cancel_of_a_run_no_worker_has_started_ends_it(stack: Stack) -> None:
    """A run whose workflow waits on a queue (here one no worker serves): the cancel
    takes it off the queue and ends the run, without waiting for a worker to start it."""
    run_id = stack.finished_run(1, "queued, then cancelled")
    workflow_id = _as_if_still_going(stack, run_id)
    stack.execute(
        f"UPDATE {stack.workflow_table} SET status = 'ENQUEUED', queue_name = 'nobody-serves'"
        " WHERE workflow_uuid = :w",
        w=workflow_id,
    )
    r = stack.client.post(f"/runs/{run_id}/cancel", json={}, headers=stack.auth("alice"))
    assert r.status_code in (200, 202), r.text
    # A worker that started it would end it itself, so the reaper waits out its grace
    # (QUEUED_CANCEL_GRACE_S) first: the cancel is made older than that here.
    stack.execute(
        "UPDATE run_cancels SET requested_at = '2000-01-01T00:00:00.000Z' WHERE run_id = :r",
        r=run_id,
    )
    done = stack.wait(run_id, {"failed", "cancelled", "succeeded"}, timeout=30)
    assert done["status"] == "cancelled", done
    rows = stack.sql(
        f"SELECT status FROM {stack.workflow_table} WHERE workflow_uuid = :w", w=workflow_id
    )
    assert rows == [("CANCELLED",)]
