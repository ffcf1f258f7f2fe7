"""The PostgreSQL connection bounds on a real server: the server-side timeouts are
set on every connection, a statement past them fails, and a migration lifts them.
(The client-side answer bound is exercised by tests/chaos/test_network_faults.py,
which needs a server that never answers.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from ledger import PgTimeouts, open_database
from ledger._net import long_statements
from tests.support.stack import drop_database, fresh_database_url, postgres_available

pytestmark = pytest.mark.skipif(not postgres_available(), reason="no PostgreSQL server")

TIGHT = PgTimeouts(statement_s=0.5, idle_in_transaction_s=3.0, answer_s=5.0)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    made = fresh_database_url("postgres", tmp_path)
    yield made
    drop_database(made)


def test_every_connection_carries_the_server_side_timeouts(url: str) -> None:
    db = open_database(url, timeouts=TIGHT)
    try:
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "500ms"
            idle = conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar()
            assert idle == "3s"
            assert conn.exec_driver_sql("SHOW search_path").scalar() == "gatehouse"
    finally:
        db.dispose()


def test_a_long_statement_is_ended_unless_the_block_allows_it(url: str) -> None:
    db = open_database(url, timeouts=TIGHT)
    try:
        with pytest.raises(sa.exc.OperationalError) as caught, db.engine.begin() as conn:
            conn.exec_driver_sql("SELECT pg_sleep(1)")
        assert isinstance(caught.value.orig, psycopg.errors.QueryCanceled)
        with db.engine.begin() as conn, long_statements(conn):
            conn.exec_driver_sql("SELECT pg_sleep(1)")
        # The lift was for that transaction only.
        with pytest.raises(sa.exc.OperationalError), db.engine.begin() as conn:
            conn.exec_driver_sql("SELECT pg_sleep(1)")
    finally:
        db.dispose()
