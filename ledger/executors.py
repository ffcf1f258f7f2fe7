"""Worker heartbeats and the reaper's lease (one leader, chosen through the database)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger._db import (
    Conn,
    db_clock,
    dbos_workflows,
    instant,
    is_postgres,
    now_sql,
    sql,
)
from ledger._statement import execute, rows_changed
from ledger.stretches import run_of


@dataclass(frozen=True)
class Executor:
    """One worker as its heartbeat row records it (times are ISO 8601, UTC), and how
    long ago its last heartbeat was by the database's clock, the clock that stamps it."""

    executor_id: str
    app_version: str
    hostname: str
    pid: int
    started_at: str
    heartbeat_at: str
    reaped_at: str | None
    planners: tuple[str, ...] | None = None  # None: the worker did not say (older build)
    heartbeat_age_s: float = 0.0
    stopped_at: str | None = None  # it stopped cleanly then (cleared by its next heartbeat)

    def live(self, dead_after_s: float) -> bool:
        """Alive as people and the shim judge it: a heartbeat (to the tenth of a second)
        within ``dead_after_s``, neither stopped cleanly nor handed over as dead.
        (The reaper judges by the heartbeat counter alone: ``beats``.)"""
        return (
            self.reaped_at is None
            and self.stopped_at is None
            and round(self.heartbeat_age_s, 1) <= dead_after_s
        )


__all__ = [
    "Executor",
    "Lease",
    "VersionLoad",
    "Waiting",
    "beats",
    "errored_on_full_disk",
    "full_disk_error",
    "heartbeat",
    "key_unkeyed",
    "lease",
    "list_executors",
    "mark_reaped",
    "mark_stopped",
    "renew_lease",
    "requeue_errored",
    "seize_lease",
    "unfinished_by_version",
    "unkeyed",
    "waiting",
]


@dataclass(frozen=True)
class VersionLoad:
    """The unfinished workflows DBOS holds under one application version. Only a worker
    of that version runs them: DBOS recovers a PENDING workflow under the version it
    started with, and dequeues an ENQUEUED one only on a worker of its version."""

    app_version: str  # "" for a workflow enqueued without one (the latest version takes it)
    pending: int  # started: working, or waiting for a decision or input
    enqueued: int  # waiting to be dequeued (new, or handed over from a dead worker)


def heartbeat(
    conn: Conn,
    *,
    executor_id: str,
    app_version: str,
    hostname: str,
    pid: int,
    now: str | None = None,
    planners: tuple[str, ...] = (),
) -> None:
    """This worker is alive now (and can run these planners). A worker coming back
    clears its reaped mark. The heartbeat counter moves by one.

    ``now`` None (what workers pass) stamps the row with the database's clock, so
    ages read from it do not depend on the wall clock of the worker that wrote it."""
    stamp = ":t" if now is not None else now_sql(not is_postgres(conn))
    execute(
        conn,
        sql(
            "INSERT INTO executors (executor_id, app_version, hostname, pid, started_at,"  # noqa: S608  (stamp is one of two constant SQL expressions)
            f" heartbeat_at, planners) VALUES (:e, :v, :h, :p, {stamp}, {stamp}, :pl)"
            " ON CONFLICT (executor_id) DO UPDATE SET app_version = excluded.app_version,"
            " hostname = excluded.hostname, pid = excluded.pid,"
            " heartbeat_at = excluded.heartbeat_at, reaped_at = NULL, stopped_at = NULL,"
            " planners = excluded.planners, beat = executors.beat + 1"
        ),
        {
            "e": executor_id,
            "v": app_version,
            "h": hostname,
            "p": pid,
            "t": now,
            "pl": ",".join(planners),
        },
    )


@dataclass(frozen=True)
class Lease:
    """Who holds a lease, and its counter (moved by every renewal)."""

    holder: str
    beat: int


def lease(conn: Conn, name: str) -> Lease | None:
    row = execute(conn, sql("SELECT holder, beat FROM leases WHERE name = :n"), {"n": name}).first()
    return None if row is None else Lease(str(row[0]), int(row[1]))


def renew_lease(conn: Conn, *, name: str, holder: str, until: str) -> bool:
    """Take lease ``name`` if nobody holds it, or renew it if ``holder`` does (its
    counter moves). ``until`` is informational: expiry is judged by the contenders,
    from the counter (see ``seize_lease``), never from a clock."""
    execute(
        conn,
        sql(
            "INSERT INTO leases (name, holder, expires_at, beat) VALUES (:n, :h, :u, 1)"
            " ON CONFLICT (name) DO UPDATE SET expires_at = excluded.expires_at,"
            " beat = leases.beat + 1 WHERE leases.holder = excluded.holder"
        ),
        {"n": name, "h": holder, "u": until},
    )
    held = lease(conn, name)
    return held is not None and held.holder == holder


def seize_lease(conn: Conn, *, name: str, holder: str, seen: Lease, until: str) -> bool:
    """Take over lease ``name`` from a holder that stopped renewing it: only if it
    is still exactly as the caller saw it (same holder, same counter)."""
    done = execute(
        conn,
        sql(
            "UPDATE leases SET holder = :h, expires_at = :u, beat = beat + 1"
            " WHERE name = :n AND holder = :old AND beat = :b RETURNING name"
        ),
        {"n": name, "h": holder, "u": until, "old": seen.holder, "b": seen.beat},
    ).first()
    return done is not None


def beats(conn: Conn, *, app_version: str, me: str) -> dict[str, int]:
    """The heartbeat counter of every other unreaped executor of this version."""
    rows = execute(
        conn,
        sql(
            "SELECT executor_id, beat FROM executors WHERE reaped_at IS NULL"
            " AND app_version = :v AND executor_id <> :me ORDER BY executor_id"
        ),
        {"v": app_version, "me": me},
    ).all()
    return {str(r[0]): int(r[1]) for r in rows}


def mark_reaped(conn: Conn, *, executor_id: str, beat: int, now: str) -> bool:
    """Mark a dead executor handed over; False if it sent a heartbeat meanwhile
    (its counter moved past ``beat``)."""
    done = execute(
        conn,
        sql(
            "UPDATE executors SET reaped_at = :t WHERE executor_id = :e AND beat = :b"
            " AND reaped_at IS NULL RETURNING executor_id"
        ),
        {"t": now, "e": executor_id, "b": beat},
    ).first()
    return done is not None


def mark_stopped(conn: Conn, *, executor_id: str, pid: int) -> bool:
    """This worker process stops cleanly now (the database's clock); False when the row
    is another process's by now (the same executor id started again elsewhere)."""
    done = execute(
        conn,
        sql(
            f"UPDATE executors SET stopped_at = {now_sql(not is_postgres(conn))}"  # noqa: S608  (one of two constant SQL expressions)
            " WHERE executor_id = :e AND pid = :p RETURNING executor_id"
        ),
        {"e": executor_id, "p": pid},
    ).first()
    return done is not None


def list_executors(conn: Conn) -> list[Executor]:
    """Every worker that ever sent a heartbeat, the most recent first. Ages are read
    against the database's clock, never the reader's: a shim whose host clock was
    stepped an hour ahead must not see every worker as an hour silent."""
    now = db_clock(conn)
    rows = execute(
        conn,
        sql(
            "SELECT executor_id, app_version, hostname, pid, started_at, heartbeat_at, reaped_at,"
            " planners, stopped_at FROM executors ORDER BY heartbeat_at DESC, executor_id"
        ),
    ).all()
    return [
        Executor(
            executor_id=str(r[0]),
            app_version=str(r[1]),
            hostname=str(r[2]),
            pid=int(r[3]),
            started_at=str(r[4]),
            heartbeat_at=str(r[5]),
            reaped_at=None if r[6] is None else str(r[6]),
            planners=None if r[7] is None else tuple(p for p in str(r[7]).split(",") if p),
            heartbeat_age_s=(now - instant(str(r[5]))).total_seconds(),
            stopped_at=None if r[8] is None else str(r[8]),
        )
        for r in rows
    ]


def unfinished_by_version(conn: Conn) -> list[VersionLoad]:
    """Per application version, the workflows not finished yet (DBOS's tables; none
    before DBOS made them, as on a database no worker has started on yet)."""
    postgres = is_postgres(conn)
    probe = (
        "SELECT to_regclass('dbos.workflow_status')"
        if postgres
        else "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'workflow_status'"
    )
    if not execute(conn, sql(probe)).scalar():
        return []
    wf = dbos_workflows(conn)
    rows = execute(
        conn,
        sql(
            "SELECT COALESCE(application_version, ''),"  # noqa: S608  (a fixed table name)
            " SUM(CASE WHEN status = 'PENDING' THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN status = 'ENQUEUED' THEN 1 ELSE 0 END)"
            f" FROM {wf} WHERE status IN ('PENDING', 'ENQUEUED')"
            " GROUP BY COALESCE(application_version, '') ORDER BY 1"
        ),
    ).all()
    return [VersionLoad(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def requeue_errored(conn: Conn, workflow_id: str, queue_name: str) -> bool:
    """Put a workflow DBOS ended in ``ERROR`` back on ``queue_name``, as
    ``DBOS.resume_workflow`` does for any other unfinished one (which leaves an
    ``ERROR`` alone). Only for a run whose Gatehouse row has not ended: the worker
    calls it for a run a full disk stopped mid-way whose error DBOS managed to
    record (a write squeezed into the full disk), which would otherwise stay
    ``running`` for good. A later stretch (``RUN_ID:N``) is its run's too."""
    wf = dbos_workflows(conn)
    now_ms = (
        "(EXTRACT(EPOCH FROM now()) * 1000)::bigint"
        if is_postgres(conn)
        else ("CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)")
    )
    done = execute(
        conn,
        sql(
            f"UPDATE {wf} SET status = 'ENQUEUED', queue_name = :q, owner_xid = NULL,"  # noqa: S608
            " recovery_attempts = 0, workflow_deadline_epoch_ms = NULL,"
            " deduplication_id = NULL, started_at_epoch_ms = NULL, completed_at = NULL,"
            f" updated_at = {now_ms}"
            " WHERE workflow_uuid = :w AND status = 'ERROR' AND EXISTS (SELECT 1 FROM"
            " runs r WHERE r.run_id = :r AND r.finished_at IS NULL)"
        ),
        {"q": queue_name, "w": workflow_id, "r": run_of(workflow_id)},
    )
    return rows_changed(done) > 0


# How a full disk reads in the error DBOS recorded (SQLite's message, ENOSPC, EDQUOT,
# Gatehouse's own code): what ``ledger.storage_full`` recognises, as text.
FULL_DISK_TEXT = ("database or disk is full", "No space left on device",
                   "Disk quota exceeded", "storage_full")  # fmt: skip


def full_disk_error(column: str) -> tuple[str, dict[str, str]]:
    """SQL that is true when ``column`` (a DBOS workflow's recorded error, a fixed
    column name) reads as a full disk (``FULL_DISK_TEXT``), and its parameters."""
    like = " OR ".join(f"{column} LIKE :fd{i}" for i in range(len(FULL_DISK_TEXT)))
    return f"({like})", {f"fd{i}": f"%{text}%" for i, text in enumerate(FULL_DISK_TEXT)}


def errored_on_full_disk(conn: Conn, app_version: str, limit: int = 50) -> list[str]:
    """Workflows of ``app_version`` that DBOS ended in ``ERROR`` for a full disk while
    their run never ended: what ``requeue_errored`` puts back. The worker that saw the
    disk fill up re-queues its own; this finds those whose worker died first. A
    later stretch (``RUN_ID:N``) is matched to its run by the id before the colon."""
    pg = is_postgres(conn)
    wf = dbos_workflows(conn)
    run = (
        "split_part(w.workflow_uuid, ':', 1)"
        if pg
        else "CASE WHEN instr(w.workflow_uuid, ':') > 0"
        " THEN substr(w.workflow_uuid, 1, instr(w.workflow_uuid, ':') - 1)"
        " ELSE w.workflow_uuid END"
    )
    full, texts = full_disk_error("w.error")
    rows = execute(
        conn,
        sql(
            f"SELECT w.workflow_uuid FROM {wf} w JOIN runs r ON r.run_id = {run}"  # noqa: S608  (fixed names; the texts are parameters)
            " WHERE w.status = 'ERROR' AND r.finished_at IS NULL"
            f" AND w.application_version = :v AND {full}"
            " ORDER BY w.workflow_uuid LIMIT :n"
        ),
        {"v": app_version, "n": limit, **texts},
    ).all()
    return [str(r[0]) for r in rows]


# Unfinished workflows of a queue that carry no partition key: queued before the
# queue was partitioned (an older release's, or recovered from one).
_UNKEYED = (
    " WHERE queue_name = :q AND status IN ('ENQUEUED', 'PENDING') AND queue_partition_key IS NULL"
)


@dataclass(frozen=True)
class Waiting:
    """What a worker's heartbeat saw waiting in DBOS's tables (``waiting``)."""

    queues: frozenset[str]  # of those asked about, the queues with work to claim
    timers: bool  # a delayed workflow to make ready, or a deadline passed


# DBOS's timers, as its background jobs find them (each matches one of its indexes).
_DELAY_OVER = "status = 'DELAYED' AND delay_until_epoch_ms <= :now"
_DEADLINE_PASSED = (
    "status IN ('ENQUEUED', 'PENDING', 'DELAYED')"
    " AND workflow_deadline_epoch_ms IS NOT NULL AND workflow_deadline_epoch_ms <= :now"
)


def waiting(
    conn: Conn, queue_names: Sequence[str], now_ms: int, application: str | None
) -> Waiting:
    """In one statement: which of ``queue_names`` hold work waiting to be claimed
    (``ENQUEUED``), and whether DBOS has a timer due at ``now_ms`` (epoch ms): a
    workflow whose delay is over, or an unfinished one past its deadline. Only the
    rows ``application``'s DBOS acts on count (its own and those of no application;
    None: every row), so another application's rows in the same database never
    look due. Each ``EXISTS`` is answered from one of DBOS's indexes."""
    wf = dbos_workflows(conn)
    conditions = [f"queue_name = :q{i} AND status = 'ENQUEUED'" for i in range(len(queue_names))]
    conditions += [_DELAY_OVER, _DEADLINE_PASSED]
    ours = " AND (application_name = :app OR application_name IS NULL)" if application else ""
    looks = ", ".join(f"EXISTS (SELECT 1 FROM {wf} WHERE {c}{ours})" for c in conditions)  # noqa: S608  (fixed names)
    params: dict[str, object] = {f"q{i}": q for i, q in enumerate(queue_names)}
    params |= {"now": now_ms, "app": application}
    row = execute(conn, sql(f"SELECT {looks}"), params).one()
    *queued, delay_over, deadline_passed = (bool(x) for x in row)
    return Waiting(
        queues=frozenset(q for q, yes in zip(queue_names, queued, strict=True) if yes),
        timers=delay_over or deadline_passed,
    )


def unkeyed(conn: Conn, queue_name: str) -> bool:
    """Whether any unfinished workflow of ``queue_name`` has no partition key: DBOS
    never claims one from a partitioned queue (``key_unkeyed`` gives them one)."""
    wf = dbos_workflows(conn)
    query = f"SELECT 1 FROM {wf}{_UNKEYED} LIMIT 1"  # noqa: S608  (fixed names)
    found = execute(conn, sql(query), {"q": queue_name}).first()
    return found is not None


def key_unkeyed(conn: Conn, queue_name: str, partition: str) -> int:
    """Put the unfinished workflows of ``queue_name`` that have no partition key in
    ``partition``; how many. Work an older release queued is claimed again."""
    wf = dbos_workflows(conn)
    done = execute(
        conn,
        sql(f"UPDATE {wf} SET queue_partition_key = :p{_UNKEYED}"),  # noqa: S608  (fixed names)
        {"q": queue_name, "p": partition},
    )
    return rows_changed(done)
