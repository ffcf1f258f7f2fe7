"""The ledger's statements on both databases, through the ledger's own functions.

On PostgreSQL they bypass SQLAlchemy's per-statement machinery for psycopg's
cursor on the same connection (``ledger/_statement.py``); what the callers rely on
must not change with it: the transaction their caller holds (begun if none is,
committed or rolled back by it), SQLAlchemy's errors (a duplicate key, a dropped
connection invalidated in its pool), the engine's cursor events, a statement whose
parameters SQLAlchemy must expand, and a percent sign that is the SQL's own.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ledger import Database, calls, events, evidence, now_iso, runs
from tests.support.rows import new_run, statements_seen


def test_a_connection_with_no_transaction_gets_one_its_caller_commits(db: Database) -> None:
    new_run(db, "run_t")
    with db.engine.connect() as conn:
        events.emit(conn, "run_t", "message", {"n": "kept"})
        assert conn.in_transaction()
        conn.commit()
        events.emit(conn, "run_t", "message", {"n": "dropped"})
        conn.rollback()
    with db.engine.connect() as conn:
        kept = [e.body for e in events.after(conn, "run_t", 0) if e.kind == "message"]
    assert kept == [{"n": "kept"}]


def test_a_duplicate_key_is_sqlalchemys_error_and_its_transaction_rolls_back(
    db: Database,
) -> None:
    new_run(db, "run_d")
    with pytest.raises(sa.exc.IntegrityError):
        new_run(db, "run_d")
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar_one() == 1
        assert runs.run_status(conn, "run_d") is not None


def test_the_engines_cursor_events_see_each_statement(db: Database) -> None:
    new_run(db, "run_e")
    seen = statements_seen(db, "SELECT status FROM runs WHERE run_id")
    with db.engine.connect() as conn:
        runs.run_status(conn, "run_e")
        runs.run_status(conn, "run_e")
    assert len(seen) == 2


def test_an_expanding_parameter_and_a_percent_sign_read_right(db: Database) -> None:
    for run_id in ("run_a", "run_b", "run_c"):
        new_run(db, run_id)
        with db.engine.begin() as conn:
            key = calls.op_key(run_id, "s1", 1)
            assert calls.claim(conn, key=key, run_id=run_id, step_id="s1", attempt=1,
                               kind="tool", target="noop", request={"n": 1})  # fmt: skip
    with db.engine.begin() as conn:
        found = calls.of_runs(conn, ["run_a", "run_c"])
        assert sorted(c.run_id for c in found.values()) == ["run_a", "run_c"]
        # ``LIKE 'security_event/%'``: sent as written, the row is found
        evidence.put_security_event(
            conn, episode_id="ep_1", run_id=None, error_code="forbidden", category="auth",
            severity="low", body={"episode_id": "ep_1"}, recorded_at=now_iso(),
        )  # fmt: skip
        assert [e["episode_id"] for e in evidence.list_security_events(conn)] == ["ep_1"]


def test_a_dropped_connection_is_invalidated_and_the_next_one_works(
    db: Database, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("a SQLite file has no server session to drop")
    new_run(db, "run_x")
    with db.engine.connect() as conn:
        pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        conn.commit()
        with db.engine.connect() as killer:
            killer.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        with pytest.raises(sa.exc.DBAPIError) as raised:
            runs.run_status(conn, "run_x")
        assert raised.value.connection_invalidated
    with db.engine.connect() as conn:
        assert runs.run_status(conn, "run_x") is not None
