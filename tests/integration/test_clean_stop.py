"""A worker told to stop (SIGTERM, as ``gatehouse up``'s Ctrl-C and a container's stop
send) says so in the database as it exits: it is not live at once, for the shim's
/workers and for ``gatehouse up`` on any host, instead of after dead_after_s of
silence; its next heartbeat (a restart) makes it live again."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import sqlalchemy as sa

from ledger import executors, migrate, open_database
from shim.api.services.health import workers
from shim.local import free_port, in_use, start_worker

DEAD_AFTER_S = 30.0  # long: a worker judged not live here is so by its mark alone


def _row(url: str, executor_id: str) -> executors.Executor | None:
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            found = executors.list_executors(conn)
    finally:
        db.dispose()
    return next((e for e in found if e.executor_id == executor_id), None)


def test_a_cleanly_stopped_worker_says_so_and_is_not_live(db_url: str, tmp_path: Path) -> None:
    db = open_database(db_url)
    migrate(db)
    db.dispose()
    worker = start_worker(
        db_url, "stopping", tmp_path / "ws", tmp_path / "worker.log",
        {"GATEHOUSE_DEAD_AFTER_S": str(DEAD_AFTER_S)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (row := _row(db_url, "stopping")) is None or not row.live(DEAD_AFTER_S):
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker never sent a heartbeat"
            time.sleep(0.2)
        assert row.stopped_at is None
        assert in_use(db_url, free_port(), ["stopping"]) is not None  # it is running
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()

    row = _row(db_url, "stopping")
    assert row is not None and row.stopped_at is not None, row
    assert row.reaped_at is None  # stopped, not handed over as dead
    assert row.heartbeat_age_s < DEAD_AFTER_S and not row.live(DEAD_AFTER_S)

    db = open_database(db_url)
    try:
        report = workers(db, row.app_version, DEAD_AFTER_S)
        listed = report["workers"]
        assert isinstance(listed, list)
        shown = next(w for w in listed if isinstance(w, dict) and w["executor_id"] == "stopping")
        assert shown["live"] is False and shown["stopped_at"] == row.stopped_at, shown
        # gatehouse up on this database starts at once, on any host (not only where
        # the stopped pid can be seen to be gone)
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE executors SET hostname = 'elsewhere'"))
        assert in_use(db_url, free_port(), ["stopping"]) is None
        # a restart's heartbeat makes it live again
        with db.engine.begin() as conn:
            executors.heartbeat(
                conn, executor_id="stopping", app_version=row.app_version,
                hostname="elsewhere", pid=1,
            )  # fmt: skip
    finally:
        db.dispose()
    back = _row(db_url, "stopping")
    assert back is not None and back.stopped_at is None and back.live(DEAD_AFTER_S)
