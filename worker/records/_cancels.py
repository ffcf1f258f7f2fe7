"""A cancel seen at a step boundary: the boundary written into its row, and its episode."""

from __future__ import annotations

from contracts import JsonObject
from ledger import Conn, cancels, evidence, now_iso
from ledger.cancels import Cancel
from policies.episodes import episode
from worker.runtime import WorkerSettings

__all__ = ["cancel_episode", "check_boundary", "observe_cancel"]


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


def observe_cancel(
    conn: Conn, run_id: str, at: str, executor_id: str, read: cancels.Cancel | bool | None = False
) -> JsonObject | None:
    """{cancelled_by, reason, source} when the run stops at boundary ``at`` (the
    boundary and the episode written with the caller's transaction); else None.
    ``read``: the run's cancel as the caller's transaction already read it (None:
    it has none); False to read it here."""
    if read is False:
        found = cancels.observe(conn, run_id, at)
    else:
        found = cancels.observed(conn, read if isinstance(read, cancels.Cancel) else None, at)
    if found is None:
        return None
    cancel_episode(conn, found, at, executor_id)
    return found.answer()


def check_boundary(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """``{cancelled}`` when the run stops at boundary ``at`` (see ``observe_cancel``)."""
    return {"cancelled": observe_cancel(s, str(arg["run_id"]), str(arg["at"]), me.executor_id)}
