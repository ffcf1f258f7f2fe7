"""A run's events held back to a transaction's end (``ledger.events.batched``).

Written in the order they were emitted and numbered as one at a time would number
them, on PostgreSQL in one statement a run; a read of the stream inside the block
sees them; a block left by an exception writes none; the run's row is locked at the
first emit, as before, so two transactions batching into one run still take turns.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ledger import Database, events, runs
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


def _step(conn: sa.Connection, run_id: str, step_id: str, position: int) -> None:
    runs.record_step(conn, run_id=run_id, step_id=step_id, position=position,
                     driver_kind="noop", connector_id="note", status="succeeded",
                     op_key=None, output={}, error_code=None, error_message=None)  # fmt: skip


def test_writes_held_with_their_events_go_in_one_statement(db: Database, backend: str) -> None:
    """``batched(writes=True)``: on PostgreSQL the held writes and every event go in one
    statement at the block's end; an event tied to a write that changed no row (a
    step recorded again) is not written and takes no number; SQLite writes each now."""
    new_run(db, "run_w")
    with db.engine.begin() as conn:
        _step(conn, "run_w", "s1", 0)  # s1 is on record already: recording it again is a no-op
    sent = statements_seen(db, "")
    with db.engine.begin() as conn, events.batched(conn, writes=True):
        events.emit(conn, "run_w", "message", {"n": 1})
        _step(conn, "run_w", "s1", 0)
        runs.set_budgets(conn, "run_w", {"cost_usd": {"used": 1.5, "limit": 2.0}})
        _step(conn, "run_w", "s2", 1)
        events.emit(conn, "run_w", "message", {"n": 2})
        if backend == "postgres":
            assert [s for s in sent if "run_steps" in s or "run_events" in s] == []
    writes = [s for s in sent if not s.startswith(("SELECT 1 FROM runs", "BEGIN"))]
    # PostgreSQL: one; SQLite: the steps, the budgets, then the events one by one
    assert len(writes) == (1 if backend == "postgres" else 6), writes
    # the step recorded again emitted nothing and took no number
    assert [(seq, kind) for seq, kind, _ in _stream(db, "run_w")] == [
        (1, "run.accepted"), (2, "step.finished"), (3, "message"), (4, "step.finished"),
        (5, "message"),
    ]  # fmt: skip
    s2 = '{"error_code":null,"op_key":null,"position":1,"status":"succeeded","step_id":"s2"}'
    assert [body for _, _, body in _stream(db, "run_w")][2:] == ['{"n":1}', s2, '{"n":2}']
    with db.engine.connect() as conn:
        steps = conn.execute(
            sa.text("SELECT step_id FROM run_steps WHERE run_id = 'run_w' ORDER BY position")
        ).all()
        budgets = conn.execute(
            sa.text("SELECT budgets_json FROM runs WHERE run_id = 'run_w'")
        ).scalar_one()
    assert [r[0] for r in steps] == ["s1", "s2"]
    assert '"used":1.5' in str(budgets)


def test_a_write_and_its_event_together_are_one_statement_made_once(
    db: Database, backend: str
) -> None:
    """``events.together`` (a claim): the write and its event as one statement on
    PostgreSQL, after what the block held; the event only when the write changed a row."""
    new_run(db, "run_t")
    emits = events.Emits("run_t", "step.started", {"step_id": "s1"})
    text = (
        "INSERT INTO run_cancels (run_id, requested_by, reason, source, requested_at)"
        " VALUES (:r, :by, NULL, 'gatehouse', :t) ON CONFLICT (run_id) DO NOTHING"
    )
    values: dict[str, object] = {"r": "run_t", "by": "olga", "t": "2026-12-03T00:00:00.000Z"}
    outcomes = []
    for _ in range(2):
        with db.engine.begin() as conn, events.batched(conn, writes=True):
            events.emit(conn, "run_t", "message", {"first": True})
            write = events.together(conn, text, values, emits)
            outcomes.append(write.changed(conn, conn.execute(write.statement, write.values)))
    assert outcomes == [True, False]
    assert [(seq, kind) for seq, kind, _ in _stream(db, "run_t")] == [
        (1, "run.accepted"), (2, "message"), (3, "step.started"), (4, "message"),
    ]  # fmt: skip
