"""A run's events held back to a transaction's end (``ledger.events.batched``).

Written in the order they were emitted and numbered as one at a time would number
them, on PostgreSQL in one statement a run; a read of the stream inside the block
sees them; a block left by an exception writes none; the run's row is locked at the
first emit, as before, so two transactions batching into one run still take turns.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ledger import Database, events
from tests.support.rows import new_run, statements_seen


def _stream(db: Database, run_id: str) -> list[tuple[int, str, str]]:
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT seq, kind, body_json FROM run_events WHERE run_id = :r ORDER BY seq"),
            {"r": run_id},
        ).all()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


def test_a_batch_is_numbered_in_order_and_written_at_once(db: Database, backend: str) -> None:
    new_run(db, "run_a")
    new_run(db, "run_b")
    inserts = statements_seen(db, "INSERT INTO run_events")
    with db.engine.begin() as conn, events.batched(conn):
        for n in range(3):
            events.emit(conn, "run_a", "message", {"n": n})
        events.emit(conn, "run_b", "message", {"n": 0}, notify=True)
        assert inserts == []  # held back until the block ends
    # one statement for run_a's three on PostgreSQL; SQLite writes them one by one
    assert len(inserts) == (2 if backend == "postgres" else 4)
    assert [(seq, kind) for seq, kind, _ in _stream(db, "run_a")] == [
        (1, "run.accepted"),
        (2, "message"),
        (3, "message"),
        (4, "message"),
    ]
    assert [body for _, _, body in _stream(db, "run_a")][1:] == [
        '{"n":0}',
        '{"n":1}',
        '{"n":2}',
    ]
    assert [seq for seq, _, _ in _stream(db, "run_b")] == [1, 2]
    with db.engine.connect() as conn:
        pending = conn.execute(
            sa.text("SELECT run_id, seq FROM run_events WHERE notify_pending = 1")
        ).all()
    assert [tuple(r) for r in pending] == [("run_b", 2)]


def test_a_read_in_the_block_sees_what_waits(db: Database) -> None:
    new_run(db, "run_a")
    with db.engine.begin() as conn, events.batched(conn):
        events.emit(conn, "run_a", "run.phase", {"status": "running", "phase": "steps"})
        assert [e.kind for e in events.after(conn, "run_a", 0)] == ["run.accepted", "run.phase"]
        events.emit(conn, "run_a", "message", {"n": 1})
        with events.batched(conn):  # nested: the outer block writes
            events.emit(conn, "run_a", "message", {"n": 2})
        assert [e.seq for e in events.after(conn, "run_a", 0)] == [1, 2, 3, 4]
    assert [seq for seq, _, _ in _stream(db, "run_a")] == [1, 2, 3, 4]


class _Failed(Exception):
    pass


def test_a_block_left_by_an_exception_writes_nothing(db: Database) -> None:
    new_run(db, "run_a")
    with pytest.raises(_Failed), db.engine.begin() as conn, events.batched(conn):
        events.emit(conn, "run_a", "message", {"n": 1})
        raise _Failed
    with db.engine.begin() as conn:  # the connection keeps nothing for the next one
        events.emit(conn, "run_a", "message", {"n": 2})
    assert [(seq, body) for seq, _, body in _stream(db, "run_a")][1:] == [(2, '{"n":2}')]


def test_the_run_is_locked_at_the_first_emit(db: Database, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("SQLite has one writer at a time: nothing is locked")
    new_run(db, "run_a")
    locks = statements_seen(db, "SELECT 1 FROM runs", "FOR UPDATE")
    with db.engine.begin() as conn, events.batched(conn):
        events.emit(conn, "run_a", "message", {"n": 1})
        assert len(locks) == 1  # taken now, not when the rows are written
        events.emit(conn, "run_a", "message", {"n": 2})
    assert len(locks) == 1
