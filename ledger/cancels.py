"""Cancellations: one ``run_cancels`` row per cancelled run, decided by the database.

A cancel and a decision on the same run are serialized on the run's row
(``lock_run``: a no-op UPDATE, a row lock on PostgreSQL; SQLite's IMMEDIATE
transaction already holds the write lock), so whichever commits first is
what the other sees: an approval after a cancel is refused, a cancel after
the run finished is refused, and neither can slip between the other's check
and its write.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import (
    INTENT_WORKFLOW,
    STRETCH_WORKFLOW,
    CancelSource,
    ErrorCode,
    GatehouseError,
    JsonObject,
    RunStatus,
)
from ledger._db import Conn, dbos_workflows, now_iso, sql
from ledger._row_locks import run_held

__all__ = [
    "Cancel",
    "LockedRun",
    "cancelled_in_dbos",
    "get",
    "lock_run",
    "observe",
    "rejected",
    "request",
]


@dataclass(frozen=True)
class Cancel:
    run_id: str
    requested_by: str
    reason: str | None
    source: CancelSource
    requested_at: str
    observed_at: str | None

    def answer(self) -> JsonObject:
        """As the flow's ``cancelled`` port answers it (live and in a replay)."""
        return {"cancelled_by": self.requested_by, "reason": self.reason, "source": self.source}


@dataclass(frozen=True)
class LockedRun:
    status: RunStatus
    submitted_by: str
    stretch: int | None = None  # the stretch the run is in (None: begun before the split)


def lock_run(conn: Conn, run_id: str) -> LockedRun | None:
    """Take the run's row lock for the rest of the transaction; None if no such run."""
    row = conn.execute(
        sql(
            "UPDATE runs SET updated_at = updated_at WHERE run_id = :r"
            " RETURNING status, submitted_by, stretch"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    run_held(conn, run_id)
    try:
        return LockedRun(RunStatus(row[0]), str(row[1]), None if row[2] is None else int(row[2]))
    except ValueError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "a runs row failed validation when read back",
            {"table": "runs", "key": run_id, "problem": str(exc)[:500]},
        ) from exc


def _source(value: str, run_id: str) -> CancelSource:
    if value == "gatehouse":
        return "gatehouse"
    if value == "dbos":
        return "dbos"
    raise GatehouseError(
        ErrorCode.CORRUPT_RECORD,
        "a run_cancels row failed validation when read back",
        {"table": "run_cancels", "key": run_id, "problem": f"source {value!r}"},
    )


def get(conn: Conn, run_id: str) -> Cancel | None:
    row = conn.execute(
        sql(
            "SELECT run_id, requested_by, reason, source, requested_at, observed_at"
            " FROM run_cancels WHERE run_id = :r"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    return Cancel(
        run_id=row[0],
        requested_by=row[1],
        reason=row[2],
        source=_source(str(row[3]), run_id),
        requested_at=row[4],
        observed_at=row[5],
    )


def request(
    conn: Conn, run_id: str, *, requested_by: str, reason: str | None, source: CancelSource
) -> tuple[Cancel, bool]:
    """The first cancellation per run wins: (the one on record, whether this one was it)."""
    inserted = conn.execute(
        sql(
            "INSERT INTO run_cancels (run_id, requested_by, reason, source, requested_at)"
            " VALUES (:r, :by, :why, :src, :t) ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
        ),
        {"r": run_id, "by": requested_by, "why": reason, "src": source, "t": now_iso()},
    ).first()
    on_record = get(conn, run_id)
    if on_record is None:  # pragma: no cover - the row was just written or already there
        raise GatehouseError(ErrorCode.INTERNAL_ERROR, "cancellation vanished after insert")
    return on_record, inserted is not None


def observe(conn: Conn, run_id: str, at: str) -> Cancel | None:
    """The cancellation the flow stops on at boundary ``at``, or None to go on.

    The first boundary that sees the row is written into it; asked again at
    that same boundary (a wait that broke off, then the flow's own check) the
    answer is the same. A replay reads ``observed_at`` instead of this. One read
    when there is no cancellation (every boundary of nearly every run).
    """
    found = get(conn, run_id)
    if found is None:
        return None
    if found.observed_at is None:
        conn.execute(
            sql(
                "UPDATE run_cancels SET observed_at = :at WHERE run_id = :r AND observed_at IS NULL"
            ),
            {"at": at, "r": run_id},
        )
        found = get(conn, run_id)  # this boundary's, or one that wrote first
    return found if found is not None and found.observed_at == at else None


def rejected(conn: Conn, run_id: str) -> bool:
    """Whether the run's plan was rejected: it ends rejected, a cancel has nothing to stop."""
    row = conn.execute(
        sql(
            "SELECT 1 FROM plan_approvals a JOIN runs r ON r.run_id = a.run_id"
            " WHERE a.run_id = :r AND a.decision = 'rejected'"
            " AND (r.plan_digest IS NULL OR a.plan_digest = r.plan_digest)"
        ),
        {"r": run_id},
    ).first()
    return row is not None


def cancelled_in_dbos(conn: Conn, limit: int = 100) -> list[str]:
    """Unfinished runs whose current workflow (``RUN_ID``, or ``RUN_ID:N`` for a
    later stretch) DBOS holds CANCELLED: cancelled behind Gatehouse's back, they
    cannot end themselves. A parked run has no workflow to cancel, so only the runs
    with one are looked at (index ``runs_live``): thousands of plans waiting for
    people cost this probe nothing."""
    wf = dbos_workflows(conn)
    rows = conn.execute(
        sql(
            f"SELECT r.run_id FROM runs r JOIN {wf} w ON w.workflow_uuid ="  # noqa: S608  (a fixed table name)
            " CASE WHEN COALESCE(r.stretch, 0) = 0 THEN r.run_id"
            " ELSE r.run_id || ':' || CAST(r.stretch AS TEXT) END"
            " WHERE r.finished_at IS NULL AND r.parked_wait IS NULL"
            " AND w.status = 'CANCELLED' AND w.name IN (:intent, :stretch)"
            " ORDER BY r.created_at LIMIT :lim"
        ),
        {"intent": INTENT_WORKFLOW, "stretch": STRETCH_WORKFLOW, "lim": limit},
    ).all()
    return [str(r[0]) for r in rows]
