"""Cancelling a run, DBOS side, and ending runs no workflow will carry on.

(The boundary check itself is a record, ``worker.records.check_boundary``, run as
the step ``gatehouse.cancel_check`` where no other step's commit checks.)

* ``end_workflow`` — after ``gatehouse.finish`` made the run ``cancelled``,
  the workflow cancels itself in DBOS, so ``dbos workflow list`` agrees. Only
  then: a DBOS-cancelled workflow can run no further step.
* ``end_stopped`` — the reaper's leader looks every tick for unfinished runs
  whose current workflow DBOS will not run any further (``ledger.cancels.stopped``)
  and ends each, so no run is left ``running`` with no way out:

  - cancelled through DBOS (``dbos workflow cancel``, ``DBOSClient.cancel_workflow``):
    ended ``cancelled`` like Gatehouse's own cancel (``cancelled_by: "dbos"``), at the
    boundary it had reached, with the trace digest the flow reaches over its
    recorded rows;
  - ended in ``ERROR`` (not for a full disk: those are put back on the queue), past
    DBOS's recovery attempts, ``SUCCESS`` without ending the run, or with no record
    in DBOS at all: ended ``failed`` (``workflow_lost``), the cause a security
    event — or ``cancelled`` when a cancel is on record, since that is what the
    person asked for;
  - a cancel on record while the workflow is still queued ten seconds later
    (``ledger.cancels.QUEUED_CANCEL_GRACE_S``): DBOS takes it off the queue (cancels
    it), and the next tick ends it as above. A cancel so ends any
    run within a heartbeat or two of a live worker, whatever its workflow is doing
    (a step already running ends first: the stall detector bounds it).
"""

from __future__ import annotations

import logging

from dbos import DBOS

from contracts import (
    APPROVAL_TOPIC,
    Decision,
    ErrorCode,
    JsonObject,
    RunStatus,
)
from ledger import (
    Conn,
    approvals,
    cancels,
    evidence,
    now_iso,
    plan_cards,
    run_views,
    stretches,
)
from policies.episodes import security_episode
from worker.records import cancel_episode, close_run
from worker.replay import trace_so_far
from worker.runtime import Runtime

__all__ = ["APPROVAL", "COMPILE", "end_stopped", "end_workflow"]

_log = logging.getLogger("gatehouse.cancel")

COMPILE = "@compile"
APPROVAL = "@approval"


def end_workflow() -> None:
    """The run is recorded ``cancelled``: end this workflow CANCELLED in DBOS too.

    DBOS then refuses this execution's outcome write and parks it, so the
    workflow never reports SUCCESS. A crash before this line re-runs it on
    recovery (``gatehouse.finish`` is served from its checkpoint).
    """
    workflow_id = DBOS.workflow_id
    if workflow_id is not None:
        DBOS.cancel_workflow(workflow_id)


# ---------------------------------------------------------------- DBOS-side cancels
def _boundary(conn: Conn, run_id: str) -> str:
    """The boundary the flow of a stranded run had reached: where its replay stops."""
    card = plan_cards.get_plan_card(conn, run_id)
    if card is None:
        return COMPILE
    decided = approvals.decision_for(conn, run_id, card.plan_digest)
    if decided is None or decided.decision is not Decision.APPROVED:
        return APPROVAL
    view = run_views.get_run(conn, run_id, {})
    done = {s.step_id for s in view.steps} if view is not None else set()
    for step in card.plan.steps:
        if step.step_id not in done:
            return step.step_id
    return APPROVAL  # every step recorded: it was cancelled on its way to finish


def end_stopped(rt: Runtime, found: list[cancels.Stopped]) -> list[str]:
    """End each of these runs no workflow carries on (as ``ledger.cancels.stopped``
    found them); returns those ended."""
    ended = []
    for run in found:
        if run.status == "ENQUEUED":  # a cancel asked of a run no worker has started
            DBOS.cancel_workflow(run.workflow_id)  # the next tick finds it CANCELLED
            continue
        if run.status == "CANCELLED" or run.cancel_asked:
            done = _reconcile(rt, run.run_id)
        else:
            done = _fail(rt, run.run_id)
        if done:
            ended.append(run.run_id)
    return ended


def _fail(rt: Runtime, run_id: str) -> bool:
    """End a run whose workflow ended without ending it (or vanished): ``failed``,
    the cause recorded as a security event and in the run's error message."""
    with rt.db.engine.connect() as conn:  # gone on already? (before the replay below)
        if not cancels.stopped(conn, run_id):
            return False
    try:  # what the flow reaches over its recorded rows; a run this broken may not replay
        trace = trace_so_far(rt.db, rt.settings, run_id)
    except Exception:  # noqa: BLE001  (the run is ended all the same, without a trace digest)
        _log.warning("run %s: no trace digest over its records", run_id, exc_info=True)
        trace = None
    me = rt.settings.executor_id
    with rt.db.engine.begin() as conn:
        run = cancels.lock_run(conn, run_id)
        still = cancels.stopped(conn, run_id)  # asked again under the lock: resumed meanwhile?
        if run is None or run.status.terminal or not still or still[0].cancel_asked:
            return False
        found = still[0]
        message = f"the run cannot go on: {found.cause}"
        details: JsonObject = {
            "workflow_id": found.workflow_id,
            "dbos_status": found.status,
            "dbos_error": None if found.error is None else found.error[:2000],
            "status_before": run.status.value,
        }
        evidence.put_episode(
            conn,
            run_id,
            None,
            security_episode(
                run_id=run_id,
                subject=f"workflow_lost:{found.workflow_id}",
                code=ErrorCode.WORKFLOW_LOST,
                message=message,
                executor_id=me,
                recorded_at=now_iso(),
                details=details,
            ),
        )
        _ended(
            conn, rt, run_id, status=RunStatus.FAILED, code=ErrorCode.WORKFLOW_LOST,
            message=message, trace=trace,
        )  # fmt: skip
    _log.error("run %s ended failed: %s", run_id, message)
    return True


def _reconcile(rt: Runtime, run_id: str) -> bool:
    with rt.db.engine.begin() as conn:
        run = cancels.lock_run(conn, run_id)
        if run is None or run.status.terminal:
            return False
        at = _boundary(conn, run_id)
        cancels.request(
            conn,
            run_id,
            requested_by="dbos",
            reason="the DBOS workflow was cancelled",
            source="dbos",
        )
        cancels.observe(conn, run_id, at)
    # Committed first: the replay that computes the trace digest reads the row.
    trace = trace_so_far(rt.db, rt.settings, run_id)
    with rt.db.engine.begin() as conn:
        run = cancels.lock_run(conn, run_id)
        found = cancels.get(conn, run_id)
        if run is None or run.status.terminal or found is None:
            return False
        where = found.observed_at or at
        message = f"cancelled by {found.requested_by} at {where}" + (
            f": {found.reason}" if found.reason else ""
        )
        cancel_episode(conn, found, where, rt.settings.executor_id)
        _ended(
            conn, rt, run_id, status=RunStatus.CANCELLED, code=ErrorCode.RUN_CANCELLED,
            message=message, trace=trace,
        )  # fmt: skip
    with rt.db.engine.connect() as conn:
        split = stretches.is_split(conn, run_id)
    if not split:
        # A run from before the split waiting in place would sit there until its
        # next re-check; this wakes it, it finds itself cancelled and stops.
        DBOS.send(run_id, {"wake": True}, APPROVAL_TOPIC, idempotency_key=f"{run_id}:dbos-cancel")
    _log.warning("run %s: its DBOS workflow was cancelled; recorded as cancelled", run_id)
    return True


def _ended(
    conn: Conn,
    rt: Runtime,
    run_id: str,
    *,
    status: RunStatus,
    code: ErrorCode,
    message: str,
    trace: str | None,
) -> None:
    """End a run its workflow could not end (the caller holds its row lock), as every
    run ends (``worker.records.close_run``): its trace over what it recorded."""
    close_run(
        conn,
        run_id,
        status,
        rt.settings,
        code=code.value,
        message=message,
        trace=trace,
        steps=[],
        summary=None if status is RunStatus.CANCELLED else message,
    )
