"""A worker keeps its heartbeat moving while it starts (``worker.runtime.beating``).

Migrations, DBOS's launch and its recovery of this worker's runs can take longer
than the dead-after period on a loaded machine; the other workers' reaper must see
the heartbeat counter move all the while, or it hands the starting worker's runs
over as though it had died.
"""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa

from ledger import Database, migrate, open_database
from worker.runtime import WorkerSettings, beating


def _beat(db: Database, executor_id: str) -> int:
    with db.engine.connect() as conn:
        value = conn.execute(
            sa.text("SELECT beat FROM executors WHERE executor_id = :e"), {"e": executor_id}
        ).scalar_one()
    return int(value)


def test_the_heartbeat_moves_all_through_a_slow_start(db_url: str, tmp_path: Path) -> None:
    settings = WorkerSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": db_url,
            "GATEHOUSE_EXECUTOR_ID": "starting",
            "GATEHOUSE_WORKSPACE_ROOT": str(tmp_path / "ws"),
            "GATEHOUSE_HEARTBEAT_S": "0.2",
            "GATEHOUSE_DEAD_AFTER_S": "1",
        }
    )
    db = open_database(db_url)
    migrate(db)
    try:
        seen = []
        with beating(settings, db):
            first = _beat(db, "starting")  # the first beat is written before the body runs
            for _ in range(6):  # a "start" of 1.5 s: longer than dead-after
                time.sleep(0.25)
                seen.append(_beat(db, "starting"))
        assert seen == sorted(seen) and seen[-1] >= first + 4, (first, seen)
        after = _beat(db, "starting")
        time.sleep(0.6)
        assert _beat(db, "starting") == after, "the start's heartbeat outlived the start"
    finally:
        db.dispose()
