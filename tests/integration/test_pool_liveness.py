"""Pooled PostgreSQL connections: no round trip to check one out, and one whose
session the server ended while it sat in the pool is replaced, unseen by its user."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from ledger import open_database, system_engine
from tests.support.stack import drop_database, fresh_database_url, postgres_available

pytestmark = pytest.mark.skipif(not postgres_available(), reason="no PostgreSQL server")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    made = fresh_database_url("postgres", tmp_path)
    yield made
    drop_database(made)


def _backend(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return _pid(conn)


def _pid(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def _admin(url: str, query: str, pid: int) -> object:
    """``query`` about session ``pid``, on a connection of its own (not the pool's)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query, (pid,)).fetchone()
        return None if row is None else row[0]


@pytest.mark.parametrize("which", ["gatehouse", "dbos"])
def test_checkout_sends_nothing(url: str, which: str) -> None:
    db = open_database(url)
    engine = db.engine if which == "gatehouse" else system_engine(url)
    assert engine is not None
    try:
        pid = _backend(engine)
        changed = "SELECT state_change FROM pg_stat_activity WHERE pid = %s"
        before = _admin(url, changed, pid)
        for _ in range(3):  # the same kept connection, checked out and back
            with engine.connect():
                pass
        # a ping would have made the session busy and idle again
        assert _admin(url, changed, pid) == before
        assert _backend(engine) == pid
    finally:
        engine.dispose()
        db.dispose()


def test_a_session_ended_in_the_pool_is_replaced_unseen(url: str) -> None:
    db = open_database(url)
    try:
        pid = _backend(db.engine)
        assert _admin(url, "SELECT pg_terminate_backend(%s)", pid) is True
        # the server's last words and the closed socket reach the kept connection
        deadline = time.monotonic() + 5
        while _admin(url, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for _ in range(3):  # every kept connection is good, the ended one replaced
            with db.engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
                assert _pid(conn) != pid
    finally:
        db.dispose()
