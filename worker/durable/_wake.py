"""A worker told of new work at once: PostgreSQL ``LISTEN``, or on SQLite a socket.

Whoever queues work for workers also tells them (``ledger.work_queue.notify_work``):
on PostgreSQL ``pg_notify(ledger.work_queue.WORK_CHANNEL, …)``, delivered when the
transaction commits; on SQLite a datagram to each worker's socket on the host once
it is over (``ledger._inhost``). That is done by the transaction that queues the
work (the shim's intent, a decision's hand-off to a run's next stretch, a fork, the
expiry sweep's hand-off) or right after it (a replay or explain request, which
DBOS's client queues in a transaction of its own). Each worker listens on one
connection (SQLite: one socket); a notification (however many arrived together)
runs one pass of DBOS's queue claim now (``_dbos.dequeue_now``), in the queue
partitions the notifications name (each names the partition its work was put in).
While the worker is full (or took all it had room for, or a partition was at its
share), it looks again, at every partition, every ``_BACKLOG_S`` until a pass finds
room and nothing more: a slot that frees up is filled at once. Each time the
worker starts listening (its start, a reconnect) one pass runs at once for what
was queued meanwhile.

This thread is the worker's only claimer of the intent queue: DBOS's own queue
thread is not started for it (``DBOS.listen_queues``). The fallback passes at
every partition run here too: when the reaper's heartbeat saw work waiting on the
queue (``look_again``), and each ``GATEHOUSE_QUEUE_POLL_S`` whatever the queue
holds. So do DBOS's own chores, when the heartbeat saw them due (``dbos_work_due``:
its internal queue, its timers; DBOS's own loops for them are slowed or stopped,
``_dbos.quiet_background``); work nobody was told of (queued by DBOS itself, or while the listening
connection was down, or a lost datagram) is found there. One claimer per
process matters: a claim counts this worker's running workflows in memory before
it claims and registers what it claimed only after, so two claimers at once could
each see room for the same slot and a submitter could hold more than its share.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from contracts import INTENT_QUEUE
from ledger import PgTimeouts, WakeSocket, pg_connect, work_queue
from worker.durable._dbos import dbos_chores, dequeue_now

__all__ = ["WorkWake", "dbos_work_due", "inhost_ear", "look_again", "postgres_ear"]

_log = logging.getLogger("gatehouse.wake")
_RETRY_S = 1.0
_BACKLOG_S = 0.05  # how soon to look again while queued work may be waiting
# The longest one wait for a notification lasts: how soon the thread sees that it is
# to stop (a worker's shutdown waits for it) or that a pass is due. A wait that ends
# with nothing heard sends nothing to the database.
_TURN_S = 0.2

# What a worker listens with: opened, then asked for the partitions named within a
# timeout (empty when none were), and closed when it fails or the worker stops.
Hear = Callable[[float], set[str]]
Ear = Callable[[], AbstractContextManager[Hear]]


def postgres_ear(database_url: str, timeouts: PgTimeouts) -> Ear:
    """``LISTEN`` on the work channel, on a connection of its own."""

    @contextmanager
    def opened() -> Iterator[Hear]:
        with pg_connect(database_url, timeouts, autocommit=True) as conn:
            conn.execute(f"LISTEN {work_queue.WORK_CHANNEL}")

            def hear(timeout: float) -> set[str]:
                told = {n.payload for n in conn.notifies(timeout=timeout, stop_after=1)}
                if told:  # the rest of the batch, without waiting
                    told |= {n.payload for n in conn.notifies(timeout=0)}
                return told

            yield hear

    return opened


def inhost_ear(folder: Path) -> Ear:
    """A datagram socket in the SQLite database's wake folder (``ledger._inhost``)."""

    @contextmanager
    def opened() -> Iterator[Hear]:
        ear = WakeSocket(folder)
        try:
            yield ear.hear
        finally:
            ear.close()

    return opened


# This process's listening threads (one per launched worker).
_listening: list[WorkWake] = []


def look_again() -> None:
    """Have this process's claimer look at every partition at its next turn (within
    ``_TURN_S``): the reaper's tick saw work waiting on the queue."""
    for wake in list(_listening):
        wake.poked.set()


def dbos_work_due() -> None:
    """Have this process's claimer run DBOS's own chores at its next turn (within
    ``_TURN_S``): the reaper's tick saw work on DBOS's internal queue (``dbos workflow
    resume``, ``fork``) or a DBOS timer due (``_dbos.dbos_chores``)."""
    for wake in list(_listening):
        wake.dbos_due.set()


class WorkWake:
    """The listening thread of one worker."""

    def __init__(self, ear: Ear, poll_s: float) -> None:
        self._ear = ear
        self._poll_s = poll_s  # the fallback pass at every partition
        self.poked = threading.Event()  # a pass at every partition is due (look_again)
        self.dbos_due = threading.Event()  # DBOS's own chores are due (dbos_work_due)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gatehouse-wake", daemon=True)
        self.woken = 0  # passes run on a notification (read by tests)

    def start(self) -> None:
        _listening.append(self)
        self._thread.start()

    def stop(self) -> None:
        if self in _listening:
            _listening.remove(self)
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001  (the thread must outlive any failure)
                _log.warning("wake: the listening connection failed (%s); reopening", exc)
                # still the fallback: what was queued is claimed while it is down
                self._chores()
                self._claim(None)
                self._stop.wait(_RETRY_S)

    def _listen(self) -> None:
        with self._ear() as hear:
            # work queued before this worker listened (a worker starting on a
            # backlog, or back after a reconnect): claimed at once, not at the next poll
            backlog = True
            last_full = time.monotonic()
            while not self._stop.is_set():
                # one pass for every batch of notifications that arrived together
                due_in = last_full + self._poll_s - time.monotonic()
                told = hear(_BACKLOG_S if backlog else max(0.0, min(_TURN_S, due_in)))
                if told:
                    self.woken += 1
                self._chores()
                full = (
                    backlog
                    or self.poked.is_set()
                    or work_queue.ANY_PARTITION in told
                    or time.monotonic() - last_full >= self._poll_s
                )
                if told or full:
                    # a backlog or fallback pass looks at every partition; a
                    # notification at the partitions it names
                    if full:
                        self.poked.clear()
                    backlog = self._claim(None if full else told)
                    if full:
                        last_full = time.monotonic()

    def _chores(self) -> None:
        """DBOS's own chores, when the heartbeat saw them due."""
        if not self.dbos_due.is_set():
            return
        self.dbos_due.clear()
        try:
            dbos_chores()
        except Exception as exc:  # noqa: BLE001  (the next heartbeat sees them due again)
            if not self._stop.is_set():
                _log.warning("wake: DBOS's own chores failed (%s); the next heartbeat retries", exc)

    def _claim(self, partitions: set[str] | None) -> bool:
        """One claim pass (in these queue partitions; None: all); True when more
        queued work may be waiting."""
        try:
            return dequeue_now(INTENT_QUEUE, partitions)
        except Exception as exc:  # noqa: BLE001  (the poll picks the work up instead)
            if not self._stop.is_set():
                _log.warning("wake: claiming queued work failed (%s); the next pass will", exc)
            return False
