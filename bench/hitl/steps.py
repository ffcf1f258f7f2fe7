"""Per step, from each system's own records: a Gatehouse tool call against a bare DBOS step.

Bare DBOS checkpoints every step in ``operation_outputs`` with its start and end
(ms); a Gatehouse tool call is no DBOS step, its checkpoint is its ledger row,
which holds its start and end (``calls.started_at``, ``finished_at``). For each
workflow (each run), the steps in order give a step's own time (start → end) and
its cost in the flow (one step's start → the next one's: the step, its
checkpoint and whatever the flow does before the next). The floor: one
``INSERT`` in autocommit on the same server, what a step's own write costs at least.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import sqlalchemy as sa

from ledger import sqlalchemy_url

__all__ = [
    "APPROVAL_TO_STEP",
    "DBOS_STEP",
    "SUBMIT_TO_CARD",
    "call_times",
    "insert_floor_ms",
    "step_times",
]

DBOS_STEP = "bench.insert_step"  # the bare DBOS peer's step, by its name in operation_outputs

# The phases of a run held to issue 28's latency targets, by the names both
# Gatehouse's and bare DBOS's phase reports give them.
SUBMIT_TO_CARD = "submit → plan card (pickup, compile, gate)"
APPROVAL_TO_STEP = "approval → first tool call starts"


def step_times(url: str, function_name: str, since_ms: float) -> dict[str, Any]:
    """Median ms of a step of ``function_name`` in the workflows (of a PostgreSQL
    database) created from ``since_ms`` on: its own time, and start to next start."""
    rows = _rows(
        url,
        "SELECT o.workflow_uuid, o.started_at_epoch_ms, o.completed_at_epoch_ms"
        " FROM dbos.operation_outputs o JOIN dbos.workflow_status w"
        " ON w.workflow_uuid = o.workflow_uuid"
        " WHERE o.function_name = :f AND w.created_at >= :t"
        " ORDER BY o.workflow_uuid, o.function_id",
        {"f": function_name, "t": int(since_ms)},
    )
    return _timed(rows, float)


def call_times(url: str, since_ms: float) -> dict[str, Any]:
    """Median ms of a Gatehouse tool call in the runs (of a PostgreSQL database) created
    from ``since_ms`` on, from its ledger row: its own time, and start to next start."""
    since = datetime.fromtimestamp(since_ms / 1000, UTC).isoformat(timespec="milliseconds")
    rows = _rows(
        url,
        "SELECT c.run_id, c.started_at, c.finished_at FROM gatehouse.calls c"
        " JOIN gatehouse.runs r ON r.run_id = c.run_id"
        " WHERE c.kind = 'tool' AND r.created_at >= :t"
        " ORDER BY c.run_id, c.started_at",
        {"t": since.replace("+00:00", "Z")},
    )
    return _timed(rows, lambda stamp: _ms(str(stamp)))


def _rows(url: str, query: str, params: dict[str, Any]) -> list[Any]:
    engine = sa.create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(query), params).all())
    finally:
        engine.dispose()


def _ms(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


def _timed(rows: list[Any], to_ms: Callable[[Any], float]) -> dict[str, Any]:
    """(workflow or run, start, end) rows in order: a step's own time, start to next start."""
    by_run: dict[str, list[tuple[float, float]]] = {}
    for key, began, ended in rows:
        if began is not None and ended is not None:
            by_run.setdefault(str(key), []).append((to_ms(began), to_ms(ended)))
    own: list[float] = []
    flow: list[float] = []
    for steps in by_run.values():
        own += [e - b for b, e in steps]
        flow += [b2 - b1 for (b1, _), (b2, _) in pairwise(steps)]
    return {
        "steps": len(own),
        "own_ms": statistics.median(own) if own else 0.0,
        "flow_ms": statistics.median(flow) if flow else 0.0,
    }


def insert_floor_ms(url: str, n: int = 200) -> float:
    """Median ms of one INSERT in autocommit (a fresh table, dropped after)."""
    engine = sa.create_engine(sqlalchemy_url(url), isolation_level="AUTOCOMMIT")
    took: list[float] = []
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS bench_floor (k TEXT PRIMARY KEY)")
            for i in range(n):
                began = time.perf_counter()
                conn.execute(sa.text("INSERT INTO bench_floor (k) VALUES (:k)"), {"k": str(i)})
                took.append((time.perf_counter() - began) * 1000)
            conn.exec_driver_sql("DROP TABLE bench_floor")
    finally:
        engine.dispose()
    return statistics.median(took)
