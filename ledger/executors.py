"""Worker heartbeats and the reaper's lease (one leader, chosen through the database)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger._db import Conn


@dataclass(frozen=True)
class Executor:
    """One worker as its heartbeat row records it (times are ISO 8601, UTC)."""

    executor_id: str
    app_version: str
    hostname: str
    pid: int
    started_at: str
    heartbeat_at: str
    reaped_at: str | None
    planners: tuple[str, ...] | None = None  # None: the worker did not say (older build)


__all__ = ["Executor", "heartbeat", "list_executors", "mark_reaped", "stale", "take_lease"]


def heartbeat(
    conn: Conn,
    *,
    executor_id: str,
    app_version: str,
    hostname: str,
    pid: int,
    now: str,
    planners: tuple[str, ...] = (),
) -> None:
    """This worker is alive now (and can run these planners). A worker coming back
    clears its reaped mark."""
    conn.execute(
        sa.text(
            "INSERT INTO executors (executor_id, app_version, hostname, pid, started_at,"
            " heartbeat_at, planners) VALUES (:e, :v, :h, :p, :t, :t, :pl)"
            " ON CONFLICT (executor_id) DO UPDATE SET app_version = excluded.app_version,"
            " hostname = excluded.hostname, pid = excluded.pid,"
            " heartbeat_at = excluded.heartbeat_at, reaped_at = NULL,"
            " planners = excluded.planners"
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


def take_lease(conn: Conn, *, name: str, holder: str, now: str, until: str) -> bool:
    """Hold lease ``name`` until ``until`` if it is free, expired or already ours."""
    conn.execute(
        sa.text(
            "INSERT INTO leases (name, holder, expires_at) VALUES (:n, :h, :u)"
            " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
            " expires_at = excluded.expires_at"
            " WHERE leases.expires_at < :now OR leases.holder = excluded.holder"
        ),
        {"n": name, "h": holder, "u": until, "now": now},
    )
    row = conn.execute(sa.text("SELECT holder FROM leases WHERE name = :n"), {"n": name}).first()
    return row is not None and row[0] == holder


def stale(conn: Conn, *, cutoff: str, app_version: str, me: str) -> list[str]:
    """Executors of this version whose last heartbeat is older than ``cutoff``."""
    rows = conn.execute(
        sa.text(
            "SELECT executor_id FROM executors WHERE heartbeat_at < :c AND reaped_at IS NULL"
            " AND app_version = :v AND executor_id <> :me ORDER BY executor_id"
        ),
        {"c": cutoff, "v": app_version, "me": me},
    ).all()
    return [str(r[0]) for r in rows]


def mark_reaped(conn: Conn, *, executor_id: str, cutoff: str, now: str) -> bool:
    """Mark a dead executor handed over; False if it sent a heartbeat meanwhile."""
    done = conn.execute(
        sa.text(
            "UPDATE executors SET reaped_at = :t WHERE executor_id = :e AND heartbeat_at < :c"
            " AND reaped_at IS NULL RETURNING executor_id"
        ),
        {"t": now, "e": executor_id, "c": cutoff},
    ).first()
    return done is not None


def list_executors(conn: Conn) -> list[Executor]:
    """Every worker that ever sent a heartbeat, the most recent first."""
    rows = conn.execute(
        sa.text(
            "SELECT executor_id, app_version, hostname, pid, started_at, heartbeat_at, reaped_at,"
            " planners FROM executors ORDER BY heartbeat_at DESC, executor_id"
        )
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
        )
        for r in rows
    ]
