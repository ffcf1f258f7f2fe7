"""Readiness and the workers' heartbeats, as the shim reports them.

``/healthz`` is liveness: the shim answers and its database does. Readiness
asks more: the database answers, its schema is the one this code migrates
to, and at least one worker of the shim's application version has sent a
heartbeat within ``dead_after_s`` (the same limit after which the reaper
declares a worker dead). Without such a worker a submitted run waits
``queued``; readiness says so instead of "ok". The report also counts the
queued runs and the oldest one's age: runs can stay queued behind live
workers too, when every slot (GATEHOUSE_WORKER_CONCURRENCY) runs a stretch, or
a submitter's runs hold its share (GATEHOUSE_WORKER_SHARE). A run waiting for a
decision or for input holds no slot.
"""

from __future__ import annotations

from datetime import UTC, datetime

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue
from ledger import Database, database_unreachable, executors, pending_migrations, run_views

__all__ = ["ping", "planner_missing", "readiness", "unserved", "versions", "workers"]


def ping(db: Database) -> None:
    """Return once the database answers; raise what its loss raises."""
    db.ping()


def _age_s(stamp: str, now: datetime) -> float:
    return round((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds(), 1)


def workers(db: Database, app_version: str, dead_after_s: float) -> JsonObject:
    """Every worker that ever sent a heartbeat, with its age and whether it is live."""
    with db.engine.connect() as conn:
        found = executors.list_executors(conn)
    rows: list[JsonValue] = []
    for e in found:
        age = round(e.heartbeat_age_s, 1)
        rows.append(
            {
                "executor_id": e.executor_id,
                "app_version": e.app_version,
                "hostname": e.hostname,
                "pid": e.pid,
                "started_at": e.started_at,
                "heartbeat_at": e.heartbeat_at,
                "heartbeat_age_s": age,
                "live": e.live(dead_after_s),
                "serves_queue": e.app_version == app_version,
                "reaped_at": e.reaped_at,
                "stopped_at": e.stopped_at,
                "planners": None if e.planners is None else list[JsonValue](e.planners),
            }
        )
    listed = versions(db, app_version, dead_after_s, found)
    return {
        "workers": rows,
        "app_version": app_version,
        "dead_after_s": dead_after_s,
        "versions": listed,
        "warnings": list[JsonValue](unserved(listed)),
    }


def versions(
    db: Database,
    app_version: str,
    dead_after_s: float,
    found: list[executors.Executor] | None = None,
) -> list[JsonValue]:
    """Every application version with unfinished runs or live workers: how many runs
    wait on it (``pending``: started; ``enqueued``: not yet dequeued) and how many
    live workers serve it. A version with runs and no live worker is ``served: false``:
    its runs wait until a worker of that version starts. ``found``: the workers, when
    the caller has just read them."""
    with db.engine.connect() as conn:
        loads = {v.app_version: v for v in executors.unfinished_by_version(conn)}
        if found is None:
            found = executors.list_executors(conn)
    live: dict[str, int] = {}
    for e in found:
        if e.live(dead_after_s):
            live[e.app_version] = live.get(e.app_version, 0) + 1
    out: list[JsonValue] = []
    for version in sorted(set(loads) | set(live) | {app_version}):
        load = loads.get(version)
        # A workflow enqueued without a version is dequeued by the latest one: this shim's.
        serving = live.get(version or app_version, 0)
        pending = load.pending if load else 0
        enqueued = load.enqueued if load else 0
        out.append(
            {
                "app_version": version,
                "current": version in (app_version, ""),
                "pending": pending,
                "enqueued": enqueued,
                "live_workers": serving,
                "served": serving > 0 or pending + enqueued == 0,
            }
        )
    return out


def unserved(listed: list[JsonValue]) -> list[str]:
    """What to tell an operator about each version whose runs no live worker serves."""
    said = []
    for v in listed:
        if not isinstance(v, dict) or v.get("served") is not False:
            continue
        n = int(str(v.get("pending", 0))) + int(str(v.get("enqueued", 0)))
        said.append(
            f"{n} unfinished run(s) of application version {v.get('app_version')!r} and no"
            " live worker of that version: they wait until one starts (the release that"
            f" started them, GATEHOUSE_APP_VERSION={v.get('app_version')}); keep it until"
            " they drain"
        )
    return said


def readiness(db: Database, app_version: str, dead_after_s: float) -> tuple[bool, JsonObject]:
    """(ready, report): each check with ``ok`` and, when not, the reason and the fix."""
    checks: dict[str, JsonValue] = {}
    try:
        ping(db)
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
    seen = workers(db, app_version, dead_after_s)
    listed = seen["workers"]
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
        count, oldest = run_views.queued(conn)
    # Not a readiness condition (runs may queue for good reasons), but what a person
    # needs when runs stay queued although workers are live: how many, since when.
    info: JsonObject = {"queued": count}
    if oldest is not None:
        info["oldest_queued_s"] = _age_s(oldest, datetime.now(UTC))
    report = _report(checks)
    report["queue"] = info
    # Not a readiness condition either (new runs go to this version's workers), but a
    # run pinned to a version nobody serves would otherwise wait unseen.
    listed_versions = seen["versions"]
    report["versions"] = listed_versions
    report["warnings"] = seen["warnings"]
    return bool(live), report


def _report(checks: dict[str, JsonValue]) -> JsonObject:
    failed = [c for c in checks.values() if isinstance(c, dict) and c.get("ok") is not True]
    reasons: list[JsonValue] = [c["reason"] for c in failed if isinstance(c, dict)]
    return {"status": "not_ready" if failed else "ready", "checks": checks, "reasons": reasons}


# What a worker needs for each planner, said in a refusal.
_PLANNER_NEEDS = {
    "model": "GATEHOUSE_MODEL_BASE_URL set",
    "opencode": "OpenCode installed (mise run setup:opencode) and a model for it"
    " (GATEHOUSE_OPENCODE_MODEL_URL or GATEHOUSE_MODEL_BASE_URL)",
}


def planner_missing(
    db: Database, app_version: str, dead_after_s: float, recipe_id: str, planner: str
) -> GatehouseError | None:
    """The refusal of a recipe whose planner no live worker can run; None to accept.

    Only a worker's heartbeat says what it can run, so with no live worker at all
    (or one that does not say) the intent is accepted: it waits for a worker."""
    if planner == "template":
        return None
    live = _live(db, app_version, dead_after_s)
    if not live or any(w.planners is None or planner in w.planners for w in live):
        return None
    return GatehouseError(
        ErrorCode.PLANNER_UNAVAILABLE,
        f"recipe {recipe_id!r} needs a {planner} planner and none of the {len(live)} live"
        f" worker(s) can run one: a worker needs {_PLANNER_NEEDS.get(planner, planner)}",
        {"recipe": recipe_id, "planner": planner, "live_workers": len(live)},
    )


def _live(db: Database, app_version: str, dead_after_s: float) -> list[executors.Executor]:
    with db.engine.connect() as conn:
        found = executors.list_executors(conn)
    return [e for e in found if e.app_version == app_version and e.live(dead_after_s)]
