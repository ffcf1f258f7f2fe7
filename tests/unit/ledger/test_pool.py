"""The engine for Gatehouse's tables: a fixed set of kept connections, and SQLite's
memory bounded however large the file grows."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Connection

from ledger import SQLITE_POOL_SIZE, open_database


def test_connections_are_kept_and_never_more_than_the_pool(tmp_path: Path) -> None:
    db, size = open_database(f"sqlite:///{tmp_path / 'g.sqlite'}"), SQLITE_POOL_SIZE
    opened: list[object] = []
    event.listen(db.engine, "connect", lambda conn, _rec: opened.append(conn))
    try:
        held = [db.engine.connect() for _ in range(size)]
        got: list[Connection] = []
        # one caller more waits for one of them instead of opening its own
        waiter = threading.Thread(target=lambda: got.append(db.engine.connect()))
        waiter.start()
        waiter.join(timeout=0.3)
        assert waiter.is_alive() and not got
        held.pop().close()
        waiter.join(timeout=5)
        assert len(got) == 1
        for conn in [*held, *got]:
            conn.close()
        for _ in range(20):  # checked out and back again: nothing opened anew
            with db.engine.connect():
                pass
        assert len(opened) == size
    finally:
        db.dispose()


def test_sqlite_memory_is_bounded_for_the_whole_process(tmp_path: Path) -> None:
    db = open_database(f"sqlite:///{tmp_path / 'g.sqlite'}")
    try:
        with db.engine.connect() as conn:
            limit = conn.exec_driver_sql("PRAGMA soft_heap_limit").scalar()
        assert limit == 8 * 1024 * 1024
    finally:
        db.dispose()
