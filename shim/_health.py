"""Readiness and the workers' heartbeats, as the shim reports them.

``/healthz`` is liveness: the shim answers and its database does. Readiness
asks more: the database answers, its schema is the one this code migrates
to, and at least one worker of the shim's application version has sent a
heartbeat within ``dead_after_s`` (the same limit after which the reaper
declares a worker dead). Without such a worker a submitted run waits
``queued``; readiness says so instead of "ok". The report also counts the
queued runs and the oldest one's age: runs can stay queued behind live
workers too, since a run waiting for a decision or for input holds one of its
worker's slots (GATEHOUSE_WORKER_CONCURRENCY).
"""

from __future__ import annotations

from datetime import UTC, datetime

from contracts import JsonObject, JsonValue
from ledger import Database, database_unreachable, executors, pending_migrations, runs

__all__ = ["readiness", "workers"]


def _age_s(stamp: str, now: datetime) -> float:
    return round((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds(), 1)


def workers(db: Database, app_version: str, dead_after_s: float) -> JsonObject:
    """Every worker that ever sent a heartbeat, with its age and whether it is live."""
    now = datetime.now(UTC)
    with db.engine.connect() as conn:
        found = executors.list_executors(conn)
    rows: list[JsonValue] = []
    for e in found:
        age = _age_s(e.heartbeat_at, now)
        rows.append(
            {
                "executor_id": e.executor_id,
                "app_version": e.app_version,
                "hostname": e.hostname,
                "pid": e.pid,
                "started_at": e.started_at,
                "heartbeat_at": e.heartbeat_at,
                "heartbeat_age_s": age,
                "live": age <= dead_after_s and e.reaped_at is None,
                "serves_queue": e.app_version == app_version,
                "reaped_at": e.reaped_at,
            }
        )
    return {"workers": rows, "app_version": app_version, "dead_after_s": dead_after_s}


def readiness(db: Database, app_version: str, dead_after_s: float) -> tuple[bool, JsonObject]:
    """(ready, report): each check with ``ok`` and, when not, the reason and the fix."""
    checks: dict[str, JsonValue] = {}
    try:
        with db.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        checks["database"] = {"ok": True}
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        checks["database"] = {"ok": False, "reason": "the database cannot be reached"}
        return False, _report(checks)
    with db.engine.connect() as conn:
        pending = pending_migrations(conn)
    checks["migrations"] = (
        {"ok": True}
        if not pending
        else {
            "ok": False,
            "pending": list[JsonValue](pending),
            "reason": f"migrations {pending} are not applied: run gatehouse migrate",
        }
    )
    if pending:
        return False, _report(checks)
    listed = workers(db, app_version, dead_after_s)["workers"]
    live = [
        w
        for w in (listed if isinstance(listed, list) else [])
        if isinstance(w, dict) and w.get("live") is True and w.get("serves_queue") is True
    ]
    checks["workers"] = (
        {"ok": True, "live": len(live)}
        if live
        else {
            "ok": False,
            "live": 0,
            "reason": f"no worker of version {app_version} has sent a heartbeat in the last"
            f" {dead_after_s:g} s: queued runs wait until one starts (gatehouse worker,"
            " or gatehouse up)",
        }
    )
    with db.engine.connect() as conn:
        count, oldest = runs.queued(conn)
    # Not a readiness condition (runs may queue for good reasons), but what a person
    # needs when runs stay queued although workers are live: how many, since when.
    info: JsonObject = {"queued": count}
    if oldest is not None:
        info["oldest_queued_s"] = _age_s(oldest, datetime.now(UTC))
    report = _report(checks)
    report["queue"] = info
    return bool(live), report


def _report(checks: dict[str, JsonValue]) -> JsonObject:
    failed = [c for c in checks.values() if isinstance(c, dict) and c.get("ok") is not True]
    reasons: list[JsonValue] = [c["reason"] for c in failed if isinstance(c, dict)]
    return {"status": "not_ready" if failed else "ready", "checks": checks, "reasons": reasons}
