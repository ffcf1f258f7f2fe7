"""Cancellations: one ``run_cancels`` row per cancelled run, decided by the database.

A cancel and a decision on the same run are serialized on the run's row
(``lock_run``: a no-op UPDATE, a row lock on PostgreSQL; SQLite's IMMEDIATE
transaction already holds the write lock), so whichever commits first is
what the other sees: an approval after a cancel is refused, a cancel after
the run finished is refused, and neither can slip between the other's check
and its write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from contracts import (
    INTENT_WORKFLOW,
    STRETCH_WORKFLOW,
    CancelSource,
    ErrorCode,
    GatehouseError,
    JsonObject,
    RunStatus,
)
from ledger._db import Conn, corrupt, dbos_workflows, iso, now_iso, sql
from ledger._row_locks import run_held
from ledger._statement import execute
from ledger.executors import full_disk_error

__all__ = [
    "COLUMNS",
    "Cancel",
    "LockedRun",
    "Stopped",
    "get",
    "lock_run",
    "observe",
    "observed",
    "of_row",
    "rejected",
    "request",
    "stopped",
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
    row = execute(
        conn,
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
        raise corrupt("runs", run_id, exc) from exc


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


# run_cancels' columns, in the order ``of_row`` reads them.
COLUMNS = ("run_id", "requested_by", "reason", "source", "requested_at", "observed_at")


def get(conn: Conn, run_id: str) -> Cancel | None:
    row = execute(
        conn,
        sql(f"SELECT {', '.join(COLUMNS)} FROM run_cancels WHERE run_id = :r"),  # noqa: S608
        {"r": run_id},
    ).first()
    return None if row is None else of_row(tuple(row))


def of_row(row: Sequence[object]) -> Cancel:
    """A ``run_cancels`` row, its ``COLUMNS`` in order, as a ``Cancel``."""
    run_id = str(row[0])
    return Cancel(
        run_id=run_id,
        requested_by=str(row[1]),
        reason=None if row[2] is None else str(row[2]),
        source=_source(str(row[3]), run_id),
        requested_at=str(row[4]),
        observed_at=None if row[5] is None else str(row[5]),
    )


def request(
    conn: Conn, run_id: str, *, requested_by: str, reason: str | None, source: CancelSource
) -> tuple[Cancel, bool]:
    """The first cancellation per run wins: (the one on record, whether this one was it)."""
    inserted = execute(
        conn,
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
    return observed(conn, get(conn, run_id), at)


def observed(conn: Conn, found: Cancel | None, at: str) -> Cancel | None:
    """``observe``, the run's cancel already read (``found``; None: it has none)."""
    if found is None:
        return None
    if found.observed_at is None:
        execute(
            conn,
            sql(
                "UPDATE run_cancels SET observed_at = :at WHERE run_id = :r AND observed_at IS NULL"
            ),
            {"at": at, "r": found.run_id},
        )
        found = get(conn, found.run_id)  # this boundary's, or one that wrote first
    return found if found is not None and found.observed_at == at else None


def rejected(conn: Conn, run_id: str) -> bool:
    """Whether the run's plan was rejected: it ends rejected, a cancel has nothing to stop."""
    row = execute(
        conn,
        sql(
            "SELECT 1 FROM plan_approvals a JOIN runs r ON r.run_id = a.run_id"
            " WHERE a.run_id = :r AND a.decision = 'rejected'"
            " AND (r.plan_digest IS NULL OR a.plan_digest = r.plan_digest)"
        ),
        {"r": run_id},
    ).first()
    return row is not None


# A cancel of a run whose workflow is still queued this long after it was asked is
# taken off the queue by the reaper; before, a worker that starts it ends it itself.
QUEUED_CANCEL_GRACE_S = 10.0

# A run's current workflow: RUN_ID for its first stretch (or a run begun before the
# split), RUN_ID:N after.
_CURRENT = (
    "CASE WHEN COALESCE(r.stretch, 0) = 0 THEN r.run_id"
    " ELSE r.run_id || ':' || CAST(r.stretch AS TEXT) END"
)


@dataclass(frozen=True)
class Stopped:
    """An unfinished run that no workflow will carry on as things stand (``stopped``)."""

    run_id: str
    workflow_id: str  # the run's current workflow
    status: str | None  # DBOS's status of it; None: DBOS has no record of it (lost)
    error: str | None  # what DBOS recorded as its error, if anything
    cancel_asked: bool  # a cancel is on record for the run

    @property
    def cause(self) -> str:
        """Why the run cannot go on, for the run's error message and its security event."""
        if self.status is None:
            return f"its workflow {self.workflow_id} has no record in DBOS (lost)"
        said = (self.error or "").strip().splitlines()
        why = f": {said[0][:300]}" if said else ""
        return f"its workflow {self.workflow_id} ended in DBOS {self.status}{why}"


def stopped(conn: Conn, run_id: str | None = None, limit: int = 100) -> list[Stopped]:
    """Unfinished runs whose current workflow DBOS will not run any further, so the
    run cannot end itself: its workflow was cancelled through DBOS (behind Gatehouse's
    back), ended in ``ERROR`` or ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``, ended ``SUCCESS``
    without ending the run, or has no row at all; and runs with a cancel on record
    whose workflow is still queued ``QUEUED_CANCEL_GRACE_S`` after the cancel (no
    worker has started it: one that does ends it itself). A workflow a full disk
    ended in ``ERROR`` is not one: it is put back on the queue once space is freed
    (``executors.errored_on_full_disk``). ``run_id``: only that run (asked again under
    its row lock before acting). A parked run has no workflow to look at, so only runs
    without a park are read (index ``runs_live``): thousands of plans waiting for
    people cost this look nothing."""
    full, texts = full_disk_error("COALESCE(w.error, '')")
    only = " AND r.run_id = :run" if run_id is not None else ""
    query = sql(
        f"SELECT r.run_id, {_CURRENT}, w.status, w.error, c.run_id IS NOT NULL"  # noqa: S608  (fixed names; the values are parameters)
        f" FROM runs r LEFT JOIN {dbos_workflows(conn)} w ON w.workflow_uuid = {_CURRENT}"
        " LEFT JOIN run_cancels c ON c.run_id = r.run_id"
        f" WHERE r.finished_at IS NULL AND r.parked_wait IS NULL{only} AND r.status IN :live"
        " AND (w.workflow_uuid IS NULL OR (w.name IN (:intent, :stretch) AND ("
        "w.status IN ('CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'SUCCESS')"
        f" OR (w.status = 'ERROR' AND NOT {full})"
        " OR (w.status = 'ENQUEUED' AND c.requested_at < :asked_before))))"
        " ORDER BY r.created_at LIMIT :lim"
    ).bindparams(sa.bindparam("live", expanding=True))
    rows = execute(conn,
        query,
        {"intent": INTENT_WORKFLOW, "stretch": STRETCH_WORKFLOW, "lim": limit,
         "asked_before": iso(datetime.now(UTC) - timedelta(seconds=QUEUED_CANCEL_GRACE_S)),
         "live": [s.value for s in RunStatus if not s.terminal],
         **({"run": run_id} if run_id is not None else {}),
         **texts},
    ).all()  # fmt: skip
    return [
        Stopped(
            run_id=str(r[0]),
            workflow_id=str(r[1]),
            status=None if r[2] is None else str(r[2]),
            error=None if r[3] is None else str(r[3]),
            cancel_asked=bool(r[4]),
        )
        for r in rows
    ]
