"""A worker told of new work at once: PostgreSQL ``LISTEN`` on the work channel.

Whoever queues work for workers also sends ``pg_notify(ledger.stretches.WORK_CHANNEL,
…)``, delivered when it commits: in the transaction that queues it (the shim's
intent, a decision's hand-off to a run's next stretch, a fork, the expiry sweep's
hand-off) or right after it (a replay or explain request, which DBOS's client
queues in a transaction of its own). Each worker listens on one connection; a
notification (however many arrived together) runs one pass of DBOS's queue
claim now (``_dbos.dequeue_now``), in the queue partitions the notifications
name (each names the partition its work was put in). While the worker is full
(or took all it had room for, or a partition was at its share), it looks again,
at every partition, every ``_BACKLOG_S`` until a pass finds room and nothing
more: a slot that frees up is filled at once. Each time the connection starts
listening (the worker's start, a reconnect) one pass runs at once for what was
queued meanwhile.

On PostgreSQL this thread is the worker's only claimer of the intent queue:
DBOS's own queue thread is not started for it (``DBOS.listen_queues``), and the
fallback poll, a pass at every partition each ``GATEHOUSE_QUEUE_POLL_S``, runs
here (work queued by DBOS itself, a dead worker's runs re-enqueued, is found
there; so is everything while the listening connection is down). One claimer per
process matters: a claim counts this worker's running workflows in memory before
it claims and registers what it claimed only after, so two claimers at once
could each see room for the same slot and a submitter could hold more than its
share. SQLite has no notifications: there DBOS's queue thread polls, alone (its
default interval is short for that reason).
"""

from __future__ import annotations

import logging
import threading
import time

from contracts import INTENT_QUEUE
from ledger import PgTimeouts, pg_connect, stretches
from worker.durable._dbos import dequeue_now

__all__ = ["WorkWake"]

_log = logging.getLogger("gatehouse.wake")
_RETRY_S = 1.0
_BACKLOG_S = 0.05  # how soon to look again while queued work may be waiting


class WorkWake:
    """The listening thread of one worker (PostgreSQL only)."""

    def __init__(self, database_url: str, timeouts: PgTimeouts, poll_s: float) -> None:
        self._url = database_url
        self._timeouts = timeouts
        self._poll_s = poll_s  # the fallback pass at every partition
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gatehouse-wake", daemon=True)
        self.woken = 0  # passes run on a notification (read by tests)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001  (the thread must outlive any failure)
                _log.warning("wake: the listening connection failed (%s); reopening", exc)
                # still the fallback: what was queued is claimed while it is down
                self._claim(None)
                self._stop.wait(_RETRY_S)

    def _listen(self) -> None:
        with pg_connect(self._url, self._timeouts, autocommit=True) as conn:
            conn.execute(f"LISTEN {stretches.WORK_CHANNEL}")
            # work queued before this connection listened (a worker starting on a
            # backlog, or back after a reconnect): claimed at once, not at the next poll
            backlog = True
            last_full = time.monotonic()
            while not self._stop.is_set():
                # one pass for every batch of notifications that arrived together
                due_in = last_full + self._poll_s - time.monotonic()
                wait = _BACKLOG_S if backlog else max(0.0, min(1.0, due_in))
                told = {n.payload for n in conn.notifies(timeout=wait, stop_after=1)}
                if told:
                    self.woken += 1
                    # the rest of the batch, without waiting
                    told |= {n.payload for n in conn.notifies(timeout=0)}
                full = backlog or time.monotonic() - last_full >= self._poll_s
                if told or full:
                    # a backlog or fallback pass looks at every partition; a
                    # notification at the partitions it names
                    backlog = self._claim(None if full else told)
                    if full:
                        last_full = time.monotonic()

    def _claim(self, partitions: set[str] | None) -> bool:
        """One claim pass (in these queue partitions; None: all); True when more
        queued work may be waiting."""
        try:
            return dequeue_now(INTENT_QUEUE, partitions)
        except Exception as exc:  # noqa: BLE001  (the poll picks the work up instead)
            if not self._stop.is_set():
                _log.warning("wake: claiming queued work failed (%s); the next pass will", exc)
            return False
