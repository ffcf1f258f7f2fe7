"""Cancelling a run, DBOS side: the workflow's own end, and the sweep of DBOS cancels.

(The boundary check itself is a record, ``worker.records.check_boundary``, run as
the step ``gatehouse.cancel_check`` where no other step's commit checks.)

* ``end_workflow`` — after ``gatehouse.finish`` made the run ``cancelled``,
  the workflow cancels itself in DBOS, so ``dbos workflow list`` agrees. Only
  then: a DBOS-cancelled workflow can run no further step.
* ``end_cancelled`` — a workflow cancelled through DBOS (``dbos workflow cancel``,
  ``DBOSClient.cancel_workflow``) never runs another step, so it cannot end
  its run. The reaper's leader looks every tick; each unfinished run
  whose workflow DBOS holds CANCELLED is ended ``cancelled`` like Gatehouse's
  own cancel (``cancelled_by: "dbos"``), at the boundary it had reached, with
  the trace digest the flow reaches over its recorded rows.
"""

from __future__ import annotations

import logging

from dbos import DBOS

from contracts import (
    APPROVAL_TOPIC,
    Decision,
    ErrorCode,
    JsonValue,
    RunStatus,
)
from ledger import (
    Conn,
    anchors,
    approvals,
    cancels,
    evidence,
    now_iso,
    plan_cards,
    runs,
    stretches,
)
from policies.episodes import episode
from worker.records import cancel_episode
from worker.replay import trace_so_far
from worker.runtime import Runtime

__all__ = ["APPROVAL", "COMPILE", "end_cancelled", "end_workflow"]

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
    view = runs.get_run(conn, run_id, {})
    done = {s.step_id for s in view.steps} if view is not None else set()
    for step in card.plan.steps:
        if step.step_id not in done:
            return step.step_id
    return APPROVAL  # every step recorded: it was cancelled on its way to finish


def end_cancelled(rt: Runtime, run_ids: list[str]) -> list[str]:
    """End each of these unfinished runs whose workflow DBOS holds CANCELLED (as
    ``ledger.cancels.cancelled_in_dbos`` found them); returns those ended."""
    return [run_id for run_id in run_ids if _reconcile(rt, run_id)]


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
        if trace is not None:
            runs.set_trace_digest(conn, run_id, trace)
        runs.set_status(
            conn,
            run_id,
            RunStatus.CANCELLED,
            "done",
            error_code=ErrorCode.RUN_CANCELLED.value,
            error_message=message,
        )
        me = rt.settings.executor_id
        cancel_episode(conn, found, where, me)
        steps: list[JsonValue] = []
        evidence.put_episode(
            conn,
            run_id,
            None,
            episode(
                run_id=run_id,
                kind="summary",
                subject="run",
                episode_type="execution/run_summary",
                status="cancelled",
                summary="run cancelled",
                executor_id=me,
                recorded_at=now_iso(),
                details={
                    "status": RunStatus.CANCELLED.value,
                    "steps": steps,
                    "error_code": ErrorCode.RUN_CANCELLED.value,
                    "trace_digest": trace,
                },
            ),
        )
        settings = rt.settings  # the run's chain head, anchored (ledger/anchors.py)
        anchors.anchor_run(conn, run_id, me, settings.signing_key, settings.anchor_file)
    with rt.db.engine.connect() as conn:
        split = stretches.is_split(conn, run_id)
    if not split:
        # A run from before the split waiting in place would sit there until its
        # next re-check; this wakes it, it finds itself cancelled and stops.
        DBOS.send(run_id, {"wake": True}, APPROVAL_TOPIC, idempotency_key=f"{run_id}:dbos-cancel")
    _log.warning("run %s: its DBOS workflow was cancelled; recorded as cancelled", run_id)
    return True
