"""Self-healing: heartbeats, and a reaper that hands a dead worker's runs to the living.

Every worker writes a heartbeat row every ``tick_s``. One worker of each
application version — whoever holds that version's ``reaper:<version>`` lease in
the database — looks for workers of its own application version whose heartbeat
is older than ``dead_after_s`` and has DBOS re-enqueue that worker's PENDING
workflows, so some live worker adopts them (re-enqueueing admits exactly one
runner). Each adoption is an episode. A workflow is only ever recovered under
the version it started with. The defaults put a dead worker's runs back to work
within about 10 s.

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

Clocks: nobody's wall clock judges liveness. A worker is dead when its
heartbeat counter has not moved for ``dead_after_s`` as timed by the reaper's
own monotonic clock (``worker.runtime._liveness``); the reaper lease passes on when its
counter has not moved for three ticks, timed the same way by the contender. The
heartbeat row's ``heartbeat_at`` is stamped by the database's clock, for people
and for the shim's "live worker" checks. A worker whose wall clock is stepped
forward or back (an NTP step, a VM restored from a snapshot) is therefore
neither declared dead while alive nor able to declare the others dead.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ledger import (
    Conn,
    Database,
    database_unreachable,
    evidence,
    executors,
    iso,
    now_iso,
    stretches,
)
from policies.episodes import episode
from worker.runtime._liveness import Silence
from worker.runtime._settings import WorkerSettings
from worker.runtime._state import Runtime

__all__ = ["Pass", "Reaper", "Upkeep", "beating", "heartbeat", "say_stopped"]

_log = logging.getLogger("gatehouse.reaper")


def heartbeat(settings: WorkerSettings, db: Database) -> None:
    """Say this worker is alive now (and clear a reaped mark: it came back)."""
    with db.engine.begin() as conn:
        _beat(settings, conn)


def _beat(settings: WorkerSettings, conn: Conn) -> None:
    executors.heartbeat(
        conn,
        executor_id=settings.executor_id,
        app_version=settings.app_version,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        now=None,  # the database's clock: a stepped worker clock must not age the row
        planners=settings.planners(),
    )


def say_stopped(settings: WorkerSettings, db: Database) -> None:
    """Say this worker stopped cleanly (at its stop, once its reaper and DBOS stopped):
    nobody has to wait out ``dead_after_s`` to know it is gone. Best effort: a worker
    that cannot reach its database to say so is judged by its silence, as before."""
    try:
        with db.engine.begin() as conn:
            executors.mark_stopped(conn, executor_id=settings.executor_id, pid=os.getpid())
    except Exception:  # noqa: BLE001  (stopping goes on; the heartbeat's age tells the rest)
        _log.warning("could not record this worker's clean stop", exc_info=True)


@contextmanager
def beating(settings: WorkerSettings, db: Database) -> Iterator[None]:
    """Heartbeat every tick while the body runs: a worker whose start (migrations,
    DBOS's launch and recovery) takes longer than ``dead_after_s`` is starting, not
    dead, and must not have its runs handed over meanwhile. The reaper thread takes
    over the heartbeat once the worker is up."""
    heartbeat(settings, db)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(settings.heartbeat_s):
            try:
                heartbeat(settings, db)
            except Exception:  # noqa: BLE001  (the launch itself reports a lost database)
                _log.debug("heartbeat during start failed", exc_info=True)

    thread = threading.Thread(target=beat, name="gatehouse-start-beat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=settings.heartbeat_s + 30)


LEASE = "reaper"  # each application version has its own: reaper:<version>

# The leader's pass over what its tick's look found (the runs it acted on).
Pass = Callable[[Runtime], list[str]]


@dataclass(frozen=True)
class Upkeep:
    """What the reaper has the workflow engine do (``worker.durable`` gives these)."""

    # Every tick, once the database took the heartbeat: put back on a queue the
    # runs a full disk stopped in this process.
    resume_stranded: Callable[[Database], list[str]]
    # Every tick, while leader, inside the tick's transaction (its connection and this
    # worker's application version): what the leader's pass has to do — end the runs
    # whose workflow was cancelled behind Gatehouse's back, re-queue runs a full disk
    # ended whose worker died, end waits that are over. None: nothing; else the pass,
    # run once that transaction has committed.
    due: Callable[[Conn, str], Pass | None]
    # A dead worker's runs: re-enqueued for the living, the ids handed over.
    hand_over: Callable[[list[str]], list[str]]
    # How many workflows of (executor id, application version) are still PENDING.
    pending: Callable[[str, str], int]
    # Every tick, inside the tick's transaction: when work waits on the queue, have
    # this worker's claimer look at every partition (its fallback pass).
    look_for_work: Callable[[Conn], None]


class Reaper(threading.Thread):
    def __init__(
        self,
        rt: Runtime,
        upkeep: Upkeep,
        tick_s: float,
        dead_after_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="gatehouse-reaper", daemon=True)
        self.rt = rt
        self.upkeep = upkeep
        self.tick_s = tick_s
        self.dead_after_s = dead_after_s
        self.stop = threading.Event()
        self._clock = clock
        self._last_ok: float | None = (
            None  # monotonic time of the last tick that reached the database
        )
        self._healthy_since: float | None = None  # ... since when every tick has
        self._workers = Silence(clock)  # other workers' heartbeat counters
        self._lease = Silence(clock)  # the reaper lease's (holder, counter)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.tick()
                # the database took the heartbeat: there is room again
                self.upkeep.resume_stranded(self.rt.db)
            except Exception as exc:  # noqa: BLE001  (a lost database must not kill the thread; it retries next tick)
                self._healthy_since = None
                self._workers.forget()
                self._lease.forget()
                if database_unreachable(exc):
                    first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
                    _log.warning(
                        "reaper: the database is not reachable (%s: %s)", type(exc).__name__, first
                    )
                else:
                    _log.warning("reaper tick failed", exc_info=True)
            self.stop.wait(self.tick_s)

    def tick(self) -> list[str]:
        """One heartbeat, and — when leader — one pass over dead workers. Returns adopted ids.

        An idle tick is one transaction: the heartbeat, the lease, the other workers'
        counters, the leader's look for work (``Upkeep.due``) and this worker's look at
        the queue (``Upkeep.look_for_work``) together."""
        s = self.rt.settings
        now_dt = datetime.now(UTC)
        now = iso(now_dt)  # wall clock: written for people to read, never compared
        until = iso(now_dt + timedelta(seconds=3 * self.tick_s))
        with self.rt.db.engine.begin() as conn:
            _beat(s, conn)
            leader = self._lead(conn, until)
            counters = executors.beats(conn, app_version=s.app_version, me=s.executor_id)
            work = self.upkeep.due(conn, s.app_version) if leader else None
            self.upkeep.look_for_work(conn)
        mono = self._clock()  # the database has taken this tick
        if (
            self._last_ok is None
            or self._healthy_since is None
            or mono - self._last_ok > 3 * self.tick_s
        ):
            self._healthy_since = mono  # (re)gained the database, or this thread fell behind
            self._workers.forget()
            self._lease.forget()
        self._last_ok = mono
        silent = self._workers.see_all(counters)
        if work is not None:
            work(self.rt)
        if not leader or mono - self._healthy_since < self.dead_after_s:
            return []
        adopted: list[str] = []
        for executor_id, quiet_s in silent.items():
            if quiet_s >= self.dead_after_s:
                adopted.extend(self._hand_over(executor_id, counters[executor_id], now, quiet_s))
        return adopted

    def _lead(self, conn: Conn, until: str) -> bool:
        """Renew the lease if this worker holds it (or nobody does); take it over from
        a holder whose renewals stopped three ticks ago by this worker's monotonic clock."""
        me = self.rt.settings.executor_id
        # One leader per application version: a reaper hands over only the runs of its
        # own version, so during an upgrade (old workers kept to drain theirs) a leader
        # of the new version must not keep the old ones from judging.
        name = f"{LEASE}:{self.rt.settings.app_version}"
        if executors.renew_lease(conn, name=name, holder=me, until=until):
            self._lease.forget()
            return True
        held = executors.lease(conn, name)
        if held is None:
            return False
        if self._lease.see(name, held) < 3 * self.tick_s:
            return False
        _log.warning("reaper lease of %s not renewed for 3 ticks; taking it over", held.holder)
        return executors.seize_lease(conn, name=name, holder=me, seen=held, until=until)

    def _hand_over(self, executor_id: str, beat: int, now: str, quiet_s: float) -> list[str]:
        s = self.rt.settings
        with self.rt.db.engine.connect() as conn:
            still = executors.beats(conn, app_version=s.app_version, me=s.executor_id)
        if still.get(executor_id) != beat:
            return []  # it came back (or another reaper marked it)
        ids = self.upkeep.hand_over([executor_id])
        with self.rt.db.engine.begin() as conn:
            # a workflow handed over is a run's stretch: RUN_ID, or RUN_ID:N
            for run_id in dict.fromkeys(stretches.run_of(w) for w in ids):
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
        left = self.upkeep.pending(executor_id, s.app_version)
        if left:
            _log.warning("worker %s: %d run(s) not handed over yet; next pass", executor_id, left)
        else:
            with self.rt.db.engine.begin() as conn:
                if executors.mark_reaped(conn, executor_id=executor_id, beat=beat, now=now):
                    _log.warning(
                        "worker %s marked dead: its heartbeat counter stood at %d for %.1f s",
                        executor_id,
                        beat,
                        quiet_s,
                    )
        if ids:
            _log.warning("worker %s is dead; re-enqueued %d run(s)", executor_id, len(ids))
        return ids
