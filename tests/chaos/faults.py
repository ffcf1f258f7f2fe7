"""Fault injectors: kill -9 of a worker, PostgreSQL crash-restarts, terminated sessions.

Each injector says what it did (a progress line) and counts it in the figures.
"""

from __future__ import annotations

import random
import time

from contracts import INTENT_WORKFLOW, STRETCH_WORKFLOW
from tests.chaos.client import Figures, say
from tests.chaos.harness import DB_NAME, Stack

__all__ = ["Faults"]


class Faults:
    def __init__(self, stack: Stack, rng: random.Random, figures: Figures) -> None:
        self.stack = stack
        self.rng = rng
        self.figures = figures
        self.down_s_total = 0.0

    def kill_random_worker(self, min_uptime_s: float = 0.8) -> str | None:
        """SIGKILL one live worker chosen at random (it has been up a moment at least)."""
        now = time.monotonic()
        candidates = [s for s in self.stack.workers.live() if now - s.started >= min_uptime_s]
        if not candidates:
            return None
        slot = self.rng.choice(candidates)
        if not self.stack.workers.kill(slot.executor_id, "random"):
            return None
        say(f"kill -9 worker {slot.executor_id} (pid {slot.proc.pid})")
        return slot.executor_id

    def restart_database(self, down_s: float, kill_while_down: bool = False) -> None:
        """``pg_ctl stop -m immediate`` (a crash), ``down_s`` seconds away, then start.

        With ``kill_while_down`` a worker is also killed while the database is away,
        so its replacement starts without a database and has to wait for it.
        """
        extra = " and a worker killed meanwhile" if kill_while_down else ""
        say(f"PostgreSQL crash-restart (down {down_s:.1f} s{extra})")
        started = time.monotonic()
        self.stack.pg.stop("immediate")
        if kill_while_down:
            self.kill_random_worker(min_uptime_s=0)
        time.sleep(down_s)
        self.stack.pg.start()
        self.down_s_total += time.monotonic() - started
        self.figures.add("db_restarts")

    def terminate_connections(self) -> int:
        """``pg_terminate_backend`` every session of Gatehouse's database."""
        ended = self.stack.pg.terminate_backends(DB_NAME)
        self.figures.add("terminate_rounds")
        self.figures.add("terminated_backends", ended)
        say(f"pg_terminate_backend: {ended} session(s) ended")
        return ended

    def parked(self, run_id: str) -> bool:
        """Whether the run is parked at a decision (rows only: no workflow holds it)."""
        rows = self.stack.pg.query(
            DB_NAME,
            "SELECT COUNT(*) FROM gatehouse.runs WHERE run_id = :r AND parked_wait IS NOT NULL",
            r=run_id,
        )
        return int(str(rows[0][0])) == 1

    def pending_runs(self, executor_id: str) -> list[str]:
        """Runs whose stretch DBOS has PENDING under an executor id (read from its table;
        a stretch after a decision is the workflow RUN_ID:N)."""
        rows = self.stack.pg.query(
            DB_NAME,
            "SELECT workflow_uuid FROM dbos.workflow_status"
            " WHERE executor_id = :e AND status = 'PENDING' AND name IN (:n, :s)",
            e=executor_id,
            n=INTENT_WORKFLOW,
            s=STRETCH_WORKFLOW,
        )
        return sorted({str(r[0]).split(":")[0] for r in rows})
