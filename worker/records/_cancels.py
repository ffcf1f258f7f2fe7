"""A cancel seen at a step boundary: the boundary written into its row, and its episode."""

from __future__ import annotations

from contracts import JsonObject
from ledger import Conn, cancels, evidence, now_iso
from ledger.cancels import Cancel
from policies.episodes import episode
from worker.runtime import WorkerSettings

__all__ = ["cancel_episode", "check_boundary", "observe_cancel", "observed_cancel"]


def cancel_episode(conn: Conn, found: Cancel, at: str, executor_id: str) -> None:
    """The ``execution/cancel`` episode: who cancelled, why, and where the run stopped."""
    evidence.put_episode(
        conn,
        found.run_id,
        None,
        episode(
            run_id=found.run_id,
            kind="cancel",
            subject=found.run_id,
            episode_type="execution/cancel",
            status="cancelled",
            summary=f"run cancelled by {found.requested_by} at {at}"
            + (f": {found.reason}" if found.reason else ""),
            executor_id=executor_id,
            recorded_at=now_iso(),
            details={
                "cancelled_by": found.requested_by,
                "reason": found.reason,
                "source": found.source,
                "requested_at": found.requested_at,
                "at": at,
            },
        ),
    )


def observe_cancel(conn: Conn, run_id: str, at: str, executor_id: str) -> JsonObject | None:
    """{cancelled_by, reason, source} when the run stops at boundary ``at`` (the
    boundary and the episode written with the caller's transaction); else None."""
    return observed_cancel(conn, cancels.get(conn, run_id), at, executor_id)


def observed_cancel(
    conn: Conn, found: cancels.Cancel | None, at: str, executor_id: str
) -> JsonObject | None:
    """``observe_cancel``, the run's cancel already read in the caller's transaction
    (``found``; None: it has none), as a call's claim reads it (``ledger.calls.look``)."""
    stops = cancels.observed(conn, found, at)
    if stops is None:
        return None
    cancel_episode(conn, stops, at, executor_id)
    return stops.answer()


def check_boundary(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """``{cancelled}`` when the run stops at boundary ``at`` (see ``observe_cancel``)."""
    return {"cancelled": observe_cancel(s, str(arg["run_id"]), str(arg["at"]), me.executor_id)}
