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

import json
from dataclasses import dataclass
from typing import Final, get_args

from contracts import JsonObject, RunEventKind, canonical_json
from ledger._db import Conn, now_iso, sql
from ledger._row_locks import hold_run

__all__ = [
    "FIRST_SQL",
    "KINDS",
    "Event",
    "after",
    "emit",
    "emit_first",
    "first_values",
    "last_phase",
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


def emit(conn: Conn, run_id: str, kind: str, body: JsonObject, *, notify: bool = False) -> None:
    """Append an event to the run's stream, in the caller's transaction."""
    if kind not in KINDS:
        raise ValueError(f"unknown run event kind {kind!r}")
    hold_run(conn, run_id)  # serializes this run's appends until the caller commits
    conn.execute(
        _INSERT,
        {"r": run_id, "k": kind, "b": canonical_json(body), "t": now_iso(),
         "n": 1 if notify else None},
    )  # fmt: skip


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


def last_phase(conn: Conn, run_id: str) -> tuple[str, str] | None:
    """(status, phase) of the run's newest ``run.phase`` event, if any."""
    row = conn.execute(
        sql(
            "SELECT body_json FROM run_events WHERE run_id = :r AND kind = 'run.phase'"
            " ORDER BY seq DESC LIMIT 1"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    body = json.loads(str(row[0]))
    return str(body.get("status")), str(body.get("phase"))


def after(conn: Conn, run_id: str, seq: int, limit: int = 500) -> list[Event]:
    """The run's events numbered above ``seq``, oldest first."""
    rows = conn.execute(
        sql(
            "SELECT seq, kind, body_json, at FROM run_events WHERE run_id = :r AND seq > :s"
            " ORDER BY seq LIMIT :n"
        ),
        {"r": run_id, "s": seq, "n": limit},
    ).all()
    return [Event(run_id, int(r[0]), str(r[1]), json.loads(str(r[2])), str(r[3])) for r in rows]
