"""Self-healing: heartbeats, and a reaper that hands a dead worker's runs to the living.

Every worker writes a heartbeat row every ``tick_s``. One of them — whoever
holds the ``reaper`` lease in the database — looks for workers of its own
application version whose heartbeat is older than ``dead_after_s`` and has
DBOS re-enqueue that worker's PENDING workflows, so some live worker adopts
them (re-enqueueing admits exactly one runner). Each adoption is an episode.
A workflow is only ever recovered under the version it started with. The
defaults put a dead worker's runs back to work within about 10 s.

Two rules keep a database outage from looking like dead workers:

* Nobody can heartbeat while the database is away, so when it comes back every
  heartbeat is old. A reaper that has just (re)gained the database — its own
  ticks failed or fell behind — waits ``dead_after_s`` of healthy ticks before
  it judges anyone, which gives every live worker time to heartbeat again.
  Otherwise it would hand over runs their live owners are still executing.
* The hand-over comes before the ``reaped`` mark, and the mark is only set once
  DBOS holds no PENDING workflow of that worker: a reaper that dies, or loses
  the database, half-way leaves the worker unmarked, and the next pass hands
  over what is left instead of stranding it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta

from dbos import DBOS

from ledger import Database, database_unreachable, evidence, executors, now_iso
from policies.episodes import episode
from worker import cancel
from worker._runtime import Runtime
from worker.settings import WorkerSettings

__all__ = ["Reaper", "heartbeat"]

_log = logging.getLogger("gatehouse.reaper")


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def heartbeat(settings: WorkerSettings, db: Database) -> None:
    """Say this worker is alive now (and clear a reaped mark: it came back)."""
    with db.engine.begin() as conn:
        executors.heartbeat(
            conn,
            executor_id=settings.executor_id,
            app_version=settings.app_version,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            now=_iso(datetime.now(UTC)),
            planners=settings.planners(),
        )


class Reaper(threading.Thread):
    def __init__(self, rt: Runtime, tick_s: float, dead_after_s: float) -> None:
        super().__init__(name="gatehouse-reaper", daemon=True)
        self.rt = rt
        self.tick_s = tick_s
        self.dead_after_s = dead_after_s
        self.stop = threading.Event()
        self._last_ok: float | None = (
            None  # monotonic time of the last tick that reached the database
        )
        self._healthy_since: float | None = None  # ... since when every tick has

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001  (a lost database must not kill the thread; it retries next tick)
                self._healthy_since = None
                if database_unreachable(exc):
                    first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
                    _log.warning(
                        "reaper: the database is not reachable (%s: %s)", type(exc).__name__, first
                    )
                else:
                    _log.warning("reaper tick failed", exc_info=True)
            self.stop.wait(self.tick_s)

    def tick(self) -> list[str]:
        """One heartbeat, and — when leader — one pass over dead workers. Returns adopted ids."""
        s = self.rt.settings
        heartbeat(s, self.rt.db)
        mono = time.monotonic()
        if (
            self._last_ok is None
            or self._healthy_since is None
            or mono - self._last_ok > 3 * self.tick_s
        ):
            self._healthy_since = mono  # (re)gained the database, or this thread fell behind
        self._last_ok = mono
        now_dt = datetime.now(UTC)
        now = _iso(now_dt)
        until = _iso(now_dt + timedelta(seconds=3 * self.tick_s))
        with self.rt.db.engine.begin() as conn:
            leader = executors.take_lease(
                conn, name="reaper", holder=s.executor_id, now=now, until=until
            )
        if leader:
            # Runs whose workflow was cancelled through DBOS cannot end themselves.
            cancel.sweep(self.rt)
        if not leader or mono - self._healthy_since < self.dead_after_s:
            return []
        cutoff = _iso(now_dt - timedelta(seconds=self.dead_after_s))
        with self.rt.db.engine.connect() as conn:
            dead = executors.stale(conn, cutoff=cutoff, app_version=s.app_version, me=s.executor_id)
        adopted: list[str] = []
        for executor_id in dead:
            adopted.extend(self._hand_over(executor_id, cutoff, now))
        return adopted

    def _hand_over(self, executor_id: str, cutoff: str, now: str) -> list[str]:
        s = self.rt.settings
        with self.rt.db.engine.connect() as conn:
            still = executors.stale(
                conn, cutoff=cutoff, app_version=s.app_version, me=s.executor_id
            )
        if executor_id not in still:
            return []  # it came back
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
        # DBOS logs and skips a workflow it could not re-enqueue: leave the worker
        # unmarked while any is left, so the next pass tries again.
        left = DBOS.list_workflows(
            status="PENDING",
            executor_id=executor_id,
            app_version=s.app_version,
            load_input=False,
            load_output=False,
        )
        if left:
            _log.warning(
                "worker %s: %d run(s) not handed over yet; next pass", executor_id, len(left)
            )
        else:
            with self.rt.db.engine.begin() as conn:
                executors.mark_reaped(conn, executor_id=executor_id, cutoff=cutoff, now=now)
        if ids:
            _log.warning("worker %s is dead; re-enqueued %d run(s)", executor_id, len(ids))
        return ids
