"""Self-healing: heartbeats, and a reaper that hands a dead worker's runs to the living.

Every worker writes a heartbeat row every ``tick_s``. One of them — whoever
holds the ``reaper`` lease in the database — looks for workers of its own
application version whose heartbeat is older than ``dead_after_s``, marks each
reaped, and has DBOS re-enqueue that worker's PENDING workflows, so some live
worker adopts them (re-enqueueing admits exactly one runner). Each adoption is
an episode. A workflow is only ever recovered under the version it started
with. The defaults put a dead worker's runs back to work within about 10 s.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import UTC, datetime, timedelta

from dbos import DBOS

from ledger import evidence, executors, now_iso
from policies.episodes import episode
from worker._runtime import Runtime

__all__ = ["Reaper"]

_log = logging.getLogger("gatehouse.reaper")


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Reaper(threading.Thread):
    def __init__(self, rt: Runtime, tick_s: float, dead_after_s: float) -> None:
        super().__init__(name="gatehouse-reaper", daemon=True)
        self.rt = rt
        self.tick_s = tick_s
        self.dead_after_s = dead_after_s
        self.stop = threading.Event()
        self._host = socket.gethostname()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001  (a lost database must not kill the thread; it retries next tick)
                _log.warning("reaper tick failed", exc_info=True)
            self.stop.wait(self.tick_s)

    def tick(self) -> list[str]:
        """One heartbeat, and — when leader — one pass over dead workers. Returns adopted ids."""
        s = self.rt.settings
        now_dt = datetime.now(UTC)
        now = _iso(now_dt)
        with self.rt.db.engine.begin() as conn:
            executors.heartbeat(
                conn,
                executor_id=s.executor_id,
                app_version=s.app_version,
                hostname=self._host,
                pid=os.getpid(),
                now=now,
            )
        until = _iso(now_dt + timedelta(seconds=3 * self.tick_s))
        with self.rt.db.engine.begin() as conn:
            leader = executors.take_lease(
                conn, name="reaper", holder=s.executor_id, now=now, until=until
            )
        if not leader:
            return []
        cutoff = _iso(now_dt - timedelta(seconds=self.dead_after_s))
        with self.rt.db.engine.connect() as conn:
            dead = executors.stale(conn, cutoff=cutoff, app_version=s.app_version, me=s.executor_id)
        adopted: list[str] = []
        for executor_id in dead:
            with self.rt.db.engine.begin() as conn:
                if not executors.mark_reaped(conn, executor_id=executor_id, cutoff=cutoff, now=now):
                    continue  # it came back
            handles = DBOS._recover_pending_workflows([executor_id])
            ids = [h.get_workflow_id() for h in handles]
            with self.rt.db.engine.begin() as conn:
                for run_id in ids:
                    evidence.put_episode(
                        conn,
                        run_id,
                        None,
                        episode(
                            run_id=run_id,
                            kind="adoption",
                            subject=f"{executor_id}@{now}",
                            episode_type="execution/adoption",
                            status="completed",
                            summary=f"run handed over from dead worker {executor_id}",
                            executor_id=s.executor_id,
                            recorded_at=now_iso(),
                            details={"from_executor": executor_id, "by": s.executor_id},
                        ),
                    )
            _log.warning("worker %s is dead; re-enqueued %d run(s)", executor_id, len(ids))
            adopted.extend(ids)
        return adopted
