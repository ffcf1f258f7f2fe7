"""The ledger's statements (``ledger._statement.execute``) on both databases.

On PostgreSQL they bypass SQLAlchemy's per-statement machinery for psycopg's
cursor on the same connection; what the callers rely on must not change with it:
the transaction their caller holds (begun if none is, committed or rolled back by
it), SQLAlchemy's errors (a duplicate key, a dropped connection invalidated in its
pool), the engine's cursor events, and the rows.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from ledger import Database
from ledger._db import sql
from ledger._statement import execute, rows_changed

_MAKE = sql("CREATE TABLE t_statement (k TEXT PRIMARY KEY, n INTEGER)")
_ADD = sql("INSERT INTO t_statement (k, n) VALUES (:k, :n)")
_ALL = sql("SELECT k, n FROM t_statement ORDER BY k")


@pytest.fixture
def table(db: Database) -> Database:
    with db.engine.begin() as conn:
        execute(conn, _MAKE)
    return db


def test_rows_and_counts(table: Database) -> None:
    with table.engine.begin() as conn:
        assert rows_changed(execute(conn, _ADD, {"k": "a", "n": 1})) == 1
        execute(conn, _ADD, {"k": "b", "n": 2})
        rows = execute(conn, _ALL)
        assert rows.all() == [("a", 1), ("b", 2)]
        assert list(rows) == [("a", 1), ("b", 2)]
        assert rows.first() == ("a", 1)
        assert rows.scalar() == "a"
        assert rows.scalars() == ["a", "b"]
        with pytest.raises(sa.exc.NoResultFound):
            rows.one()
        with pytest.raises(sa.exc.MultipleResultsFound):
            rows.one_or_none()
        none = execute(conn, sql("SELECT k FROM t_statement WHERE k = :k"), {"k": "z"})
        assert (none.first(), none.scalar(), none.one_or_none()) == (None, None, None)
        changed = execute(conn, sql("UPDATE t_statement SET n = n + 1"))
        assert rows_changed(changed) == 2 and changed.all() == []
        # a percent sign in the text is the database's, not a parameter's
        like = execute(conn, sql("SELECT COUNT(*) FROM t_statement WHERE k LIKE 'a%'"))
        assert like.scalar_one() == 1


def test_a_connection_with_no_transaction_gets_one_its_caller_commits(table: Database) -> None:
    with table.engine.connect() as conn:
        execute(conn, _ADD, {"k": "kept", "n": 1})
        assert conn.in_transaction()
        conn.commit()
        execute(conn, _ADD, {"k": "dropped", "n": 2})
        conn.rollback()
    with table.engine.connect() as conn:
        assert execute(conn, _ALL).all() == [("kept", 1)]


def test_a_duplicate_key_is_sqlalchemys_error_and_the_transaction_rolls_back(
    table: Database,
) -> None:
    with pytest.raises(sa.exc.IntegrityError), table.engine.begin() as conn:
        execute(conn, _ADD, {"k": "a", "n": 1})
        execute(conn, _ADD, {"k": "a", "n": 2})
    with table.engine.connect() as conn:
        assert execute(conn, _ALL).all() == []


def test_the_engines_cursor_events_see_each_statement(table: Database) -> None:
    seen: list[str] = []
    done: list[str] = []

    def before(_c: object, _cur: object, statement: str, *_rest: object) -> None:
        seen.append(statement)

    def after(_c: object, _cur: object, statement: str, *_rest: object) -> None:
        done.append(statement)

    event.listen(table.engine, "before_cursor_execute", before)
    event.listen(table.engine, "after_cursor_execute", after)
    try:
        with table.engine.begin() as conn:
            execute(conn, _ADD, {"k": "a", "n": 1})
            execute(conn, _ALL)
    finally:
        event.remove(table.engine, "before_cursor_execute", before)
        event.remove(table.engine, "after_cursor_execute", after)
    ours = [s for s in seen if "t_statement" in s]
    assert len(ours) == 2 and ours[0].startswith("INSERT") and ours[1].startswith("SELECT")
    assert [s for s in done if "t_statement" in s] == ours


def test_an_expanding_parameter_goes_through_sqlalchemy(table: Database) -> None:
    some = sql("SELECT k FROM t_statement WHERE k IN :ks ORDER BY k").bindparams(
        sa.bindparam("ks", expanding=True)
    )
    with table.engine.begin() as conn:
        for k in "abc":
            execute(conn, _ADD, {"k": k, "n": 0})
        assert execute(conn, some, {"ks": ["a", "c"]}).scalars() == ["a", "c"]


def test_a_dropped_connection_is_invalidated_and_the_next_one_works(
    table: Database, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("a SQLite file has no server session to drop")
    with table.engine.connect() as conn:
        pid = execute(conn, sql("SELECT pg_backend_pid()")).scalar()
        conn.commit()
        with table.engine.connect() as killer:
            killer.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        with pytest.raises(sa.exc.DBAPIError) as raised:
            execute(conn, _ALL)
        assert raised.value.connection_invalidated
    with table.engine.connect() as conn:
        assert execute(conn, _ALL).all() == []
