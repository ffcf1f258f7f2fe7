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
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Final, get_args

from sqlalchemy.sql.elements import TextClause

from contracts import JsonObject, RunEventKind, canonical_json
from ledger._db import Conn, is_postgres, now_iso, sql
from ledger._row_locks import hold_run
from ledger._statement import execute, returned_a_row, rows_changed

__all__ = [
    "FIRST_SQL",
    "KINDS",
    "Emits",
    "Event",
    "Together",
    "after",
    "batched",
    "emit",
    "emit_first",
    "first_values",
    "later",
    "together",
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
# (run_id, kind, body, at, notify, the index of the held write it is written with
# only if that write changed a row, or None).
_PENDING = "gatehouse_events_pending"
_Pending = tuple[str, str, str, str, int | None, int | None]
# Where ``batched(writes=True)`` keeps the writes ``later`` holds back (PostgreSQL).
_HELD = "gatehouse_writes_held"
# How SQLAlchemy finds a statement's bind parameters (``sa.text``).
_BIND = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


@dataclass(frozen=True)
class Emits:
    """The event a write emits when it changes a row (``later``, ``together``)."""

    run_id: str
    kind: str
    body: JsonObject
    notify: bool = False


@dataclass(frozen=True)
class _Held:
    text: str  # one INSERT or UPDATE, no RETURNING
    params: dict[str, object]


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
def batched(conn: Conn, *, writes: bool = False) -> Iterator[None]:
    """Within this block, the events ``emit`` appends in ``conn``'s transaction are
    written when it ends, on PostgreSQL in one statement a run instead of one an event
    (a tool call's completion appends three). They are written in the order they were
    emitted, numbered as ``emit`` would; the stream read in the block (``after``)
    includes them. A block left by an exception writes none of them: its
    transaction is to roll back. Nested, the outermost block writes.

    ``writes``: on PostgreSQL the writes ``later`` is given are held back too and sent
    with the events, all in one statement (data-modifying WITH queries): a tool call's
    completion writes its step's row, its episode, the run's budgets and three events
    in one round trip. Only for a transaction that reads none of them back."""
    if _PENDING in conn.info:
        yield
        return
    conn.info[_PENDING] = []
    if writes and is_postgres(conn):
        conn.info[_HELD] = []
    try:
        yield
        _flush(conn)
    finally:
        conn.info.pop(_PENDING, None)
        conn.info.pop(_HELD, None)


def later(conn: Conn, text: str, params: dict[str, object], emits: Emits | None = None) -> None:
    """A write (one INSERT or UPDATE) and the event it emits if it changes a row: held
    back to the end of a ``batched(writes=True)`` block on PostgreSQL (see there),
    made now otherwise. Nothing in the transaction may read what it writes."""
    held: list[_Held] | None = conn.info.get(_HELD)
    if held is None:
        if rows_changed(execute(conn, sql(text), params)) and emits is not None:
            emit(conn, emits.run_id, emits.kind, emits.body, notify=emits.notify)
        return
    held.append(_Held(text, params))
    if emits is not None:
        _pend(conn, emits, len(held) - 1)


@dataclass(frozen=True)
class Together:
    """A write and the event it emits if it changes a row, made ready by ``together``
    for its caller to execute (its own frame makes the write: ``ledger.calls.claim``)."""

    statement: TextClause
    values: dict[str, object]
    emits: Emits
    joined: bool  # the event is in the statement (PostgreSQL)

    def changed(self, conn: Conn, result: object) -> bool:
        """Whether the write changed a row, ``result`` being the statement's; the event
        is emitted now if it did and the statement did not hold it (SQLite)."""
        if self.joined:
            return returned_a_row(result)
        if not rows_changed(result):
            return False
        e = self.emits
        emit(conn, e.run_id, e.kind, e.body, notify=e.notify)
        return True


def together(conn: Conn, text: str, params: dict[str, object], emits: Emits) -> Together:
    """A write to make now and the event it emits if it changes a row, as one statement
    on PostgreSQL (what the block held back is written first, and the run's row locked,
    as ``emit`` would); the write alone on SQLite (``Together.changed`` emits)."""
    if not is_postgres(conn):
        return Together(sql(text), params, emits, joined=False)
    _flush(conn)
    hold_run(conn, emits.run_id)
    statement, values = _together([_Held(text, params)], [_event(emits, 0)], returning=True)
    return Together(statement, values, emits, joined=True)


def _flush(conn: Conn) -> None:
    """Write the events ``batched`` holds back, and the writes held with them, if any:
    at its end, or before a read of the stream."""
    pending: list[_Pending] | None = conn.info.get(_PENDING)
    held: list[_Held] | None = conn.info.get(_HELD)
    if held:
        conn.info[_HELD], conn.info[_PENDING] = [], []
        execute(conn, *_together(held, pending or []))
        return
    if not pending:
        return
    conn.info[_PENDING] = []
    by_run: dict[str, list[_Pending]] = {}
    for item in pending:
        by_run.setdefault(item[0], []).append(item)
    for run_id, items in by_run.items():  # each run's row is locked already (``emit``)
        if len(items) == 1 or not is_postgres(conn):  # SQLite: no round trips to save
            for _, kind, body, at, notify, _after in items:
                execute(conn, _INSERT, {"r": run_id, "k": kind, "b": body, "t": at, "n": notify})
            continue
        values: dict[str, str | int | None] = {"r": run_id}
        for i, (_, kind, body, at, notify, _after) in enumerate(items):
            values |= {f"k{i}": kind, f"b{i}": body, f"t{i}": at, f"n{i}": notify}
        execute(conn, _insert_many(len(items)), values)


def _together(
    held: list[_Held], pending: list[_Pending], *, returning: bool = False
) -> tuple[TextClause, dict[str, object]]:
    """PostgreSQL: the held writes as data-modifying WITH queries and the events as one
    INSERT after them, one statement (its text made once per shape, ``_together_text``),
    and its parameters: each write's under its own prefix."""
    values = dict[str, object]()
    for i, write in enumerate(held):
        values |= {f"w{i}_{name}": value for name, value in write.params.items()}
    for j, (run_id, kind, body, at, notify, _after) in enumerate(pending):
        values |= {f"e{j}_r": run_id, f"e{j}_k": kind, f"e{j}_b": body, f"e{j}_t": at,
                   f"e{j}_n": notify}  # fmt: skip
    texts = tuple(write.text for write in held)
    text = _together_text(texts, tuple(item[5] for item in pending), returning)
    return sql(text), values


@cache
def _together_text(texts: tuple[str, ...], afters: tuple[int | None, ...], returning: bool) -> str:
    """The statement ``_together`` sends. An event tied to a write (``afters``) is kept
    only if that write changed a row; the kept ones of each run number on from its
    stream's last event in the order they were emitted (every subquery reads the
    snapshot the statement began with, which holds none of its own rows).
    ``returning``: a row back for each event written."""
    queries = []
    for i, text in enumerate(texts):
        renamed = _BIND.sub(f":w{i}_\\g<1>", text)  # its own names
        queries.append(f"w{i} AS ({renamed} RETURNING 1)")
    rows = []
    for j, after in enumerate(afters):
        keep = "TRUE" if after is None else f"EXISTS (SELECT 1 FROM w{after})"  # noqa: S608
        rows.append(
            f"({j}, CAST(:e{j}_r AS TEXT), CAST(:e{j}_k AS TEXT), CAST(:e{j}_b AS TEXT),"
            f" CAST(:e{j}_t AS TEXT), CAST(:e{j}_n AS INTEGER), {keep})"
        )
    main = "SELECT 1"
    if rows:
        main = (
            "INSERT INTO run_events (run_id, seq, kind, body_json, at, notify_pending)"  # noqa: S608  (fixed names; the values are parameters)
            " SELECT e.r, (SELECT COALESCE(MAX(x.seq), 0) FROM run_events x WHERE x.run_id = e.r)"
            " + ROW_NUMBER() OVER (PARTITION BY e.r ORDER BY e.o), e.k, e.b, e.t, e.n"
            f" FROM (VALUES {', '.join(rows)}) AS e (o, r, k, b, t, n, keep) WHERE e.keep"
            + (" RETURNING seq" if returning else "")
        )
    return f"WITH {', '.join(queries)} {main}" if queries else main


def _event(emits: Emits, after: int | None) -> _Pending:
    return (emits.run_id, emits.kind, canonical_json(emits.body), now_iso(),
            1 if emits.notify else None, after)  # fmt: skip


def _pend(conn: Conn, emits: Emits, after: int | None) -> None:
    if emits.kind not in KINDS:
        raise ValueError(f"unknown run event kind {emits.kind!r}")
    # Serializes this run's appends until the caller commits; taken now even when the
    # row waits for the end of a batch, so that locks are taken in the order they were.
    hold_run(conn, emits.run_id)
    pending: list[_Pending] = conn.info[_PENDING]
    pending.append(_event(emits, after))


def emit(conn: Conn, run_id: str, kind: str, body: JsonObject, *, notify: bool = False) -> None:
    """Append an event to the run's stream, in the caller's transaction (held back to
    its end within ``batched``)."""
    emits = Emits(run_id, kind, body, notify)
    if _PENDING in conn.info:
        _pend(conn, emits, None)
        return
    if kind not in KINDS:
        raise ValueError(f"unknown run event kind {kind!r}")
    hold_run(conn, run_id)
    event = _event(emits, None)
    execute(conn, _INSERT, dict(zip(("r", "k", "b", "t", "n"), event[:5], strict=True)))


def emit_first(conn: Conn, run_id: str, kind: str, body: JsonObject) -> None:
    """A new run's first event, in the transaction that inserted the run's row: seq 1,
    with nothing to lock or count (no other transaction sees the run yet)."""
    execute(conn, sql(FIRST_SQL), first_values(run_id, kind, body))


def first_values(run_id: str, kind: str, body: JsonObject) -> dict[str, str]:
    """``FIRST_SQL``'s parameters (named ``ev_*``, so the statement can be a part of a
    larger one: ``ledger.intents``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown run event kind {kind!r}")
    return {"ev_r": run_id, "ev_k": kind, "ev_b": canonical_json(body), "ev_t": now_iso()}


def after(conn: Conn, run_id: str, seq: int, limit: int = 500) -> list[Event]:
    """The run's events numbered above ``seq``, oldest first."""
    _flush(conn)
    rows = execute(
        conn,
        sql(
            "SELECT seq, kind, body_json, at FROM run_events WHERE run_id = :r AND seq > :s"
            " ORDER BY seq LIMIT :n"
        ),
        {"r": run_id, "s": seq, "n": limit},
    ).all()
    return [Event(run_id, int(r[0]), str(r[1]), json.loads(str(r[2])), str(r[3])) for r in rows]
