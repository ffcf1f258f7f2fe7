"""Cancelling a run from the shim: one row decided by the database, then a wake-up.

The shim only records the request (``run_cancels``, an ``execution/cancel_request``
episode naming who and why) and wakes the run's workflow; the worker ends the
run ``cancelled`` at its next step boundary (or in its approval wait) through
its normal finish, then ends its DBOS workflow CANCELLED. An approval and a
cancel on one run are serialized on the run's row (``ledger.cancels``).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from contracts import (
    APPROVAL_TOPIC,
    CancelAccepted,
    CancelRequest,
    ErrorCode,
    GatehouseError,
    RunStatus,
)
from ledger import cancels, evidence, now_iso, stretches
from policies.episodes import episode
from shim.api.services.acting import acting_as, lock_own_run
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["cancel_run", "refuse_if_cancelled"]


def _answer(found: cancels.Cancel, status: RunStatus, recorded: bool) -> CancelAccepted:
    return CancelAccepted(
        run_id=found.run_id,
        status="cancelled" if status is RunStatus.CANCELLED else "cancelling",
        cancelled_by=found.requested_by,
        reason=found.reason,
        source=found.source,
        requested_at=found.requested_at,
        recorded=recorded,
    )


def cancel_run(service: Service, run_id: str, body: CancelRequest, who: Identity) -> CancelAccepted:
    """Cancel ``run_id`` as ``who`` (its submitter, or an operator); idempotent."""
    db, client = service.db, service.client
    body = acting_as(body, "cancelled_by", who)
    with db.engine.begin() as conn:
        run = lock_own_run(conn, run_id, who, "cancel")
        existing = cancels.get(conn, run_id)
        if existing is not None:
            return _answer(existing, run.status, recorded=False)
        if run.status.terminal or cancels.rejected(conn, run_id):
            status = RunStatus.REJECTED if not run.status.terminal else run.status
            raise GatehouseError(
                ErrorCode.RUN_ALREADY_FINISHED,
                f"run {run_id!r} is {status.value}; there is nothing to cancel",
                {"status": status.value},
            )
        found, _ = cancels.request(
            conn, run_id, requested_by=who.name, reason=body.reason, source="gatehouse"
        )
        evidence.put_episode(
            conn,
            run_id,
            None,
            episode(
                run_id=run_id,
                kind="cancel_request",
                subject=run_id,
                episode_type="execution/cancel_request",
                status="completed",
                summary=f"cancel requested by {who.name}"
                + (f": {body.reason}" if body.reason else ""),
                executor_id=who.name,
                recorded_at=now_iso(),
                details={
                    "cancelled_by": who.name,
                    "reason": body.reason,
                    "source": "gatehouse",
                    "status_at_request": run.status.value,
                },
            ),
        )
        split = service.hand_off(conn, run_id)  # a parked run's next stretch ends it
    if not split:  # a run from before the split waits in place: wake it
        client.send(run_id, {"cancel": True}, APPROVAL_TOPIC, idempotency_key=f"{run_id}:cancel")
    return _answer(found, run.status, recorded=True)


def refuse_if_cancelled(conn: Connection, run_id: str) -> stretches.Locked | None:
    """Inside a decision's transaction: lock the run, and refuse if a cancel came first;
    the run's row as it stays while the lock is held (None: no such run), read with
    the lock (``stretches.lock``).

    A workflow cancelled through DBOS whose run the sweep has not reached yet
    (within a heartbeat) is refused too, rather than recording a decision
    nothing will act on.
    """
    locked = stretches.lock(conn, run_id)
    if locked is None:
        return None  # the caller answers run_not_found
    found = cancels.get(conn, run_id)  # after the lock: one that came first is seen
    if found is not None:
        raise GatehouseError(
            ErrorCode.RUN_CANCELLED,
            f"run {run_id!r} was cancelled by {found.requested_by}; it takes no decision",
            {"cancelled_by": found.requested_by, "source": found.source},
        )
    if locked.workflow_status == "CANCELLED":  # a split run: its latest stretch's
        raise GatehouseError(
            ErrorCode.RUN_CANCELLED,
            f"the DBOS workflow of run {run_id!r} was cancelled; it takes no decision",
            {"cancelled_by": "dbos", "source": "dbos"},
        )
    return locked
