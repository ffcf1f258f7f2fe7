"""The intake's writes (``ledger.intents.take_intent``), on SQLite and PostgreSQL.

A new run's rows, the backlog it joins (counted without it: what the bounds are
checked against) and, on PostgreSQL, the word to the workers of its queue partition,
all in the intake's transaction: a transaction rolled back (a refusal) leaves no row
and tells no one.
"""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from contracts import IntentRequest
from ledger import Database, intents, work_queue


class _Refused(Exception):
    """What a caller raises to refuse, rolling the intake's transaction back."""


def _take(db: Database, who: str, n: int) -> tuple[int, int]:
    request = IntentRequest.model_validate(
        {"recipe": "echo", "objective": f"intake {n}", "submitted_by": who}
    )
    with db.engine.begin() as conn:
        return intents.take_intent(
            conn,
            intent_id=f"int_{n}",
            run_id=f"run_{n}",
            request=request,
            idempotency_key=None,
            partition=who,
        )


def _listener(db: Database) -> psycopg.Connection[tuple[object, ...]]:
    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f"LISTEN {work_queue.WORK_CHANNEL}")
    return conn


def _heard(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=0.5)]


def _count(db: Database, table: str) -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def test_the_backlog_is_counted_without_the_new_run(db: Database) -> None:
    assert _take(db, "alice", 1) == (0, 0)
    assert _take(db, "bob", 2) == (1, 0)
    assert _take(db, "alice", 3) == (2, 1)
    with db.engine.begin() as conn:  # a run a worker has taken is no longer waiting
        conn.execute(sa.text("UPDATE runs SET status = 'running' WHERE run_id = 'run_1'"))
    assert _take(db, "alice", 4) == (2, 1)
    assert _count(db, "runs") == 4
    with db.engine.connect() as conn:
        firsts = conn.execute(
            sa.text("SELECT COUNT(*) FROM run_events WHERE seq = 1 AND kind = 'run.accepted'")
        ).scalar_one()
    assert firsts == 4


def test_the_workers_are_told_at_commit_and_a_refusal_tells_no_one(
    db: Database, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite's word to the workers is a datagram after the transaction (unit)")
    listening = _listener(db)
    try:
        request = IntentRequest.model_validate(
            {"recipe": "echo", "objective": "refused", "submitted_by": "carol"}
        )
        with pytest.raises(_Refused), db.engine.begin() as conn:
            intents.take_intent(
                conn,
                intent_id="int_x",
                run_id="run_x",
                request=request,
                idempotency_key=None,
                partition="carol",
            )
            raise _Refused
        assert _heard(listening) == []
        assert _count(db, "runs") == 0 and _count(db, "intents") == 0
        _take(db, "dave", 1)
        assert _heard(listening) == ["dave"]
    finally:
        listening.close()
