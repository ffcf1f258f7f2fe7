"""A run's row lock is taken once per transaction, and still serializes its appends.

Counted at the engine: the statements that only lock a run's row (``FOR UPDATE``)
across the writes a tool call's completion makes (the chain link and three
events), against one per transaction; and two transactions appending to one
run's stream still wait for each other, the second numbering after the first.
"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from contracts import RunStatus
from ledger import Database, calls, chain, events, runs
from tests.support.rows import new_run, statements_seen


def test_appends_in_one_transaction_lock_the_run_once(db: Database, backend: str) -> None:
    new_run(db, "run_a")
    new_run(db, "run_b")
    locks = statements_seen(db, "SELECT 1 FROM runs", "FOR UPDATE")
    pg = backend == "postgres"  # SQLite: one writer at a time, nothing is locked
    with db.engine.begin() as conn:
        for n in range(3):
            events.emit(conn, "run_a", "message", {"n": n})
        events.emit(conn, "run_b", "message", {"n": 0})  # another run: its own lock
    assert len(locks) == (2 if pg else 0)
    with db.engine.begin() as conn:  # a new transaction holds nothing yet
        events.emit(conn, "run_a", "message", {"n": 3})
    assert len(locks) == (3 if pg else 0)
    with db.engine.begin() as conn:  # a status change's UPDATE already holds the row
        runs.set_status(conn, "run_a", RunStatus.RUNNING, "planning")
        events.emit(conn, "run_a", "message", {"n": 4})
    assert len(locks) == (3 if pg else 0)
    with db.engine.begin() as conn:  # taken in a savepoint: not relied on after it
        with conn.begin_nested():
            events.emit(conn, "run_a", "message", {"n": 5})
        events.emit(conn, "run_a", "message", {"n": 6})
    assert len(locks) == (5 if pg else 0)
    with db.engine.connect() as conn:
        seqs = [e.seq for e in events.after(conn, "run_a", 0)]
    assert seqs == list(range(1, 10))  # run.accepted, 7 messages, the phase


def test_a_second_writer_waits_for_the_first_to_commit(db: Database, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("SQLite has one writer at a time: there is no second writer to wait")
    new_run(db, "run_c")
    first_in = threading.Event()
    order: list[str] = []

    def second() -> None:
        first_in.wait(10)
        with db.engine.begin() as conn:
            events.emit(conn, "run_c", "message", {"who": "second"})
            order.append("second")

    waiter = threading.Thread(target=second)
    waiter.start()
    with db.engine.begin() as conn:
        events.emit(conn, "run_c", "message", {"who": "first"})
        events.emit(conn, "run_c", "message", {"who": "first again"})
        first_in.set()
        time.sleep(0.3)  # the second writer is blocked on the run's row meanwhile
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    with db.engine.connect() as conn:
        got = [(e.seq, e.body["who"]) for e in events.after(conn, "run_c", 1)]
    assert got == [(2, "first"), (3, "first again"), (4, "second")]
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM run_events")).scalar_one() == 4


def test_a_run_s_seed_is_chosen_once_and_the_lock_it_took_is_remembered(
    db: Database, backend: str
) -> None:
    new_run(db, "run_s")
    seen = statements_seen(db, "SELECT 1 FROM runs", "FOR UPDATE")
    with db.engine.begin() as conn:
        assert runs.set_seed(conn, "run_s", "first") == "first"
        assert runs.set_seed(conn, "run_s", "second") == "first"  # asked again: kept
        held_to = ("sha256:profile", "sha256:pool", None)
        assert runs.set_seed(conn, "run_s", "third", held_to) == "first"
        events.emit(conn, "run_s", "message", {"n": 1})  # the seed's UPDATE holds the row
    assert seen == []
    with db.engine.connect() as conn:
        digests = conn.execute(
            sa.text(
                "SELECT profile_digest, tool_pool_digest, cedar_digest FROM runs"
                " WHERE run_id = 'run_s'"
            )
        ).one()
    assert tuple(digests) == ("sha256:profile", "sha256:pool", None)
    with db.engine.begin() as conn:
        assert runs.set_seed(conn, "no_such_run", "third") == "third"


def _claimed(db: Database, run_id: str, step_id: str) -> str:
    key = calls.op_key(run_id, step_id, 1)
    with db.engine.begin() as conn:
        assert calls.claim(conn, key=key, run_id=run_id, step_id=step_id, attempt=1,
                           kind="tool", target="noop", request={"step": step_id})  # fmt: skip
    return key


def _complete(conn: sa.Connection, key: str, run_id: str) -> calls.CallRow:
    return calls.complete(conn, key=key, run_id=run_id, response={"ok": True, "output": {}},
                          ok=True, error_code=None, duration_ms=1)  # fmt: skip


def test_a_completion_whose_chain_head_moved_while_it_waited_is_refused_then_links_after(
    db: Database, backend: str
) -> None:
    """A completion locks the run and reads its chain's head in one statement: one that
    waited for the lock read the head as it was before the other link committed, and
    the UNIQUE (run_id, chain_seq) refuses the stale link (``chain.head_moved``); tried
    again, it links after the other one. The chain never forks."""
    if backend != "postgres":
        pytest.skip("SQLite has one writer at a time: no completion waits for another")
    new_run(db, "run_h")
    first, second = _claimed(db, "run_h", "s1"), _claimed(db, "run_h", "s2")
    locked = threading.Event()
    refused: list[BaseException] = []

    def behind() -> None:
        locked.wait(10)
        try:
            with db.engine.begin() as conn:
                _complete(conn, second, "run_h")  # waits for the first to commit
        except sa.exc.IntegrityError as exc:
            refused.append(exc)

    waiter = threading.Thread(target=behind)
    waiter.start()
    with db.engine.begin() as conn:
        _complete(conn, first, "run_h")
        locked.set()
        time.sleep(0.3)  # the second completion is blocked on the run's row meanwhile
    waiter.join(10)
    assert len(refused) == 1 and chain.head_moved(refused[0]), refused
    with db.engine.begin() as conn:  # tried again: after the first link
        assert _complete(conn, second, "run_h").status == "completed"
    with db.engine.connect() as conn:
        links = conn.execute(
            sa.text("SELECT op_key, chain_seq FROM calls WHERE run_id = 'run_h' ORDER BY 2")
        ).all()
        report = chain.verify(conn, "run_h")
    assert [tuple(r) for r in links] == [(first, 1), (second, 2)]
    assert report.ok and report.entries == 2, report
