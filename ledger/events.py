"""Each run's event stream: ``run_events``, one ordered row per thing that happened.

Every ledger function that changes a run appends its event here, in the
caller's transaction, so an event exists exactly when its change committed.
``seq`` counts from 1 per run. On PostgreSQL the writer first locks the run's
row: two transactions that add to one run's stream are serialized, and the
larger seq commits after the smaller one, so a reader that has seen up to N and
asks for ``seq > N`` never misses an event that commits later with a smaller
number. SQLite has one writer at a time anyway.

Kinds (a stable contract, documented in docs/operators.md):
``run.accepted``, ``run.phase``, ``step.started``, ``step.finished``,
``ledger.written``, ``episode``, ``approval``, ``message``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Final, get_args

from sqlalchemy.sql.elements import TextClause

from contracts import JsonObject, RunEventKind, canonical_json
from ledger._db import Conn, is_postgres, now_iso, sql
from ledger._row_locks import hold_run

__all__ = [
    "FIRST_SQL",
    "KINDS",
    "Event",
    "after",
    "batched",
    "emit",
    "emit_first",
    "first_values",
]

KINDS: Final = frozenset(get_args(RunEventKind))


@dataclass(frozen=True)
class Event:
    run_id: str
    seq: int
    kind: str
    body: JsonObject
    at: str

    def to_json(self) -> JsonObject:
        return {"run_id": self.run_id, "seq": self.seq, "kind": self.kind, "at": self.at,
                "body": self.body}  # fmt: skip


_INSERT = sql(
    "INSERT INTO run_events (run_id, seq, kind, body_json, at, notify_pending)"
    " SELECT :r, COALESCE(MAX(seq), 0) + 1, :k, :b, :t, :n FROM run_events WHERE run_id = :r"
)

# A new run's first event (``emit_first``, ``first_values``).
FIRST_SQL = (
    "INSERT INTO run_events (run_id, seq, kind, body_json, at)"
    " VALUES (:ev_r, 1, :ev_k, :ev_b, :ev_t)"
)


# Where ``batched`` keeps the events not written yet, on the connection; each as
# (run_id, kind, body, at, notify).
_PENDING = "gatehouse_events_pending"
_Pending = tuple[str, str, str, str, int | None]


@cache
def _insert_many(n: int) -> TextClause:
    """PostgreSQL: ``n`` events of one run in one statement. Each row's ``MAX(seq)``
    reads the snapshot the statement began with, which holds none of its own rows, so
    the rows number on from the stream's last event in their order."""
    rows = ", ".join(
        f"(:r, (SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = :r) + {i + 1},"  # noqa: S608
        f" :k{i}, :b{i}, :t{i}, :n{i})"
        for i in range(n)
    )
    head = "INSERT INTO run_events (run_id, seq, kind, body_json, at, notify_pending) VALUES"
    return sql(f"{head} {rows}")


@contextlib.contextmanager
def batched(conn: Conn) -> Iterator[None]:
    """Within this block, the events ``emit`` appends in ``conn``'s transaction are
    written when it ends, on PostgreSQL in one statement a run instead of one an event
    (a tool call's completion appends three). They are written in the order they were
    emitted, numbered as ``emit`` would; the stream read in the block (``after``)
    includes them. A block left by an exception writes none of them: its
    transaction is to roll back. Nested, the outermost block writes."""
    if _PENDING in conn.info:
        yield
        return
    conn.info[_PENDING] = []
    try:
        yield
        _flush(conn)
    finally:
        conn.info.pop(_PENDING, None)


def _flush(conn: Conn) -> None:
    """Write the events ``batched`` holds back, if any: at its end, or before a read of
    the stream."""
    pending: list[_Pending] | None = conn.info.get(_PENDING)
    if not pending:
        return
    conn.info[_PENDING] = []
    by_run: dict[str, list[_Pending]] = {}
    for item in pending:
        by_run.setdefault(item[0], []).append(item)
    for run_id, items in by_run.items():  # each run's row is locked already (``emit``)
        if len(items) == 1 or not is_postgres(conn):  # SQLite: no round trips to save
            for _, kind, body, at, notify in items:
                conn.execute(_INSERT, {"r": run_id, "k": kind, "b": body, "t": at, "n": notify})
            continue
        values: dict[str, str | int | None] = {"r": run_id}
        for i, (_, kind, body, at, notify) in enumerate(items):
            values |= {f"k{i}": kind, f"b{i}": body, f"t{i}": at, f"n{i}": notify}
        conn.execute(_insert_many(len(items)), values)


def emit(conn: Conn, run_id: str, kind: str, body: JsonObject, *, notify: bool = False) -> None:
    """Append an event to the run's stream, in the caller's transaction (held back to
    its end within ``batched``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown run event kind {kind!r}")
    # Serializes this run's appends until the caller commits; taken now even when the
    # row waits for the end of a batch, so that locks are taken in the order they were.
    hold_run(conn, run_id)
    event = (run_id, kind, canonical_json(body), now_iso(), 1 if notify else None)
    pending: list[_Pending] | None = conn.info.get(_PENDING)
    if pending is not None:
        pending.append(event)
        return
    conn.execute(_INSERT, dict(zip(("r", "k", "b", "t", "n"), event, strict=True)))


def emit_first(conn: Conn, run_id: str, kind: str, body: JsonObject) -> None:
    """A new run's first event, in the transaction that inserted the run's row: seq 1,
    with nothing to lock or count (no other transaction sees the run yet)."""
    conn.execute(sql(FIRST_SQL), first_values(run_id, kind, body))


def first_values(run_id: str, kind: str, body: JsonObject) -> dict[str, str]:
    """``FIRST_SQL``'s parameters (named ``ev_*``, so the statement can be a part of a
    larger one: ``ledger.intents``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown run event kind {kind!r}")
    return {"ev_r": run_id, "ev_k": kind, "ev_b": canonical_json(body), "ev_t": now_iso()}


def after(conn: Conn, run_id: str, seq: int, limit: int = 500) -> list[Event]:
    """The run's events numbered above ``seq``, oldest first."""
    _flush(conn)
    rows = conn.execute(
        sql(
            "SELECT seq, kind, body_json, at FROM run_events WHERE run_id = :r AND seq > :s"
            " ORDER BY seq LIMIT :n"
        ),
        {"r": run_id, "s": seq, "n": limit},
    ).all()
    return [Event(run_id, int(r[0]), str(r[1]), json.loads(str(r[2])), str(r[3])) for r in rows]
