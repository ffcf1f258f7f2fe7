"""What ``GET /metrics`` reports, read from the database in one short transaction.

Every figure comes from rows any shim can read, so two shims scraped at the same
moment answer the same numbers. Counters are counts of rows that are never
deleted (runs, calls, steps, decisions, security events), so they only grow;
gauges are counts of rows in a state now (a call's status moves on, so calls by
status are a gauge).
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import INTENT_QUEUE
from ledger import executors
from ledger._db import Conn, dbos_workflows, epoch_sql, is_postgres, sql
from ledger._statement import execute

__all__ = ["Snapshot", "snapshot"]


@dataclass(frozen=True)
class Snapshot:
    runs: list[tuple[str, str, int]]  # (status, phase, count)
    calls: list[tuple[str, int, float]]  # (kind, entries ever, seconds the callees took)
    open_calls: list[tuple[str, str, int]]  # (kind, status, count) now
    steps: list[tuple[str, str, int]]  # (driver_kind, status, count)
    step_errors: list[tuple[str, int]]  # (error_code, count)
    approvals: list[tuple[str, int, float]]  # (decision, count, seconds from card to decision)
    security_events: list[tuple[str, int]]  # (category, count)
    queued: list[tuple[str, int]]  # (DBOS queue, workflows enqueued)
    heartbeat_age_s: list[tuple[str, str, float]]  # (executor_id, app_version, age), not reaped


def snapshot(conn: Conn) -> Snapshot:
    def rows(text: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in execute(conn, sql(text)).all()]

    wf = dbos_workflows(conn)
    ages = [
        (e.executor_id, e.app_version, e.heartbeat_age_s)
        for e in executors.list_executors(conn)
        if e.reaped_at is None and e.stopped_at is None
    ]
    sqlite = not is_postgres(conn)
    waited = f"{epoch_sql('a.decided_at', sqlite)} - {epoch_sql('v.created_at', sqlite)}"
    return Snapshot(
        runs=[
            (str(s), str(p), int(str(n)))
            for s, p, n in rows("SELECT status, phase, COUNT(*) FROM runs GROUP BY status, phase")
        ],
        calls=[
            (str(k), int(str(n)), float(str(ms or 0)) / 1000)
            for k, n, ms in rows("SELECT kind, COUNT(*), SUM(duration_ms) FROM calls GROUP BY kind")
        ],
        open_calls=[
            (str(k), str(s), int(str(n)))
            for k, s, n in rows("SELECT kind, status, COUNT(*) FROM calls GROUP BY kind, status")
        ],
        steps=[
            (str(d), str(s), int(str(n)))
            for d, s, n in rows(
                "SELECT driver_kind, status, COUNT(*) FROM run_steps GROUP BY driver_kind, status"
            )
        ],
        step_errors=[
            (str(c), int(str(n)))
            for c, n in rows(
                "SELECT error_code, COUNT(*) FROM run_steps WHERE error_code IS NOT NULL"
                " GROUP BY error_code"
            )
        ],
        approvals=[
            (str(d), int(str(n)), float(str(t or 0)))
            for d, n, t in rows(
                f"SELECT a.decision, COUNT(*), SUM({waited}) FROM plan_approvals a"  # noqa: S608
                " JOIN plan_revisions v ON v.run_id = a.run_id AND v.plan_digest = a.plan_digest"
                " GROUP BY a.decision"
            )
        ],
        security_events=[
            (str(c), int(str(n)))
            for c, n in rows(
                "SELECT category, SUM(repeat_count) FROM security_events GROUP BY category"
            )
        ],
        queued=_with_the_intent_queue(
            [
                (str(q), int(str(n)))
                for q, n in rows(
                    f"SELECT queue_name, COUNT(*) FROM {wf} WHERE status = 'ENQUEUED'"  # noqa: S608
                    " AND queue_name IS NOT NULL GROUP BY queue_name"
                )
            ]
        ),
        heartbeat_age_s=ages,
    )


def _with_the_intent_queue(found: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The intent queue always has a sample (0 when empty): an alert on its depth
    must see a number, not an absent series."""
    if any(queue == INTENT_QUEUE for queue, _ in found):
        return found
    return [(INTENT_QUEUE, 0), *found]
