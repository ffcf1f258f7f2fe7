"""``Service``: what every feature of the shim works with, opened once per app.

The shim never runs a workflow. It reaches workers only through the
database: an intent's rows and its queue entry commit in one transaction
(``DBOSClient.enqueue_in_transaction``); so do a decision and the hand-off
of its parked run to the run's next stretch (``Service.hand_off``).
So a feature needs the database, the DBOS client, the run watch (waiting
without polling) and the settings: this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dbos import DBOS, DBOSClient, DBOSPortableJSONSerializer

from contracts import (
    INTENT_WORKFLOW,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    queue_partition,
)
from ledger import Conn, Database, migrate, open_database, stretches, system_engine, work_queue
from shim.api.services.watch import RunWatch
from shim.settings import ShimSettings

__all__ = ["STREAM_RETRY_S", "Service", "StreamSlots"]


# What a refused stream is told to wait (Retry-After): long enough for a tab to close.
STREAM_RETRY_S = 5


class StreamSlots:
    """How many streams each identity holds open in this shim, against the limit.

    A slot is given back when its stream ends however it ends: the stream's own
    ``finally`` when it ran, else when the stream is dropped unread (a ``HEAD``,
    a client gone before the first event), by a finalizer on the stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()  # a finalizer may run on another thread

    def take(self, who: str) -> None:
        with self._lock:
            held = self._open.get(who, 0)
            if held >= self.limit:
                raise GatehouseError(
                    ErrorCode.RATE_LIMITED,
                    f"{who} has {held} event streams open, the most one identity may"
                    f" (GATEHOUSE_MAX_EVENT_STREAMS); close one and try again",
                    {"retry_after_s": STREAM_RETRY_S, "limit": self.limit},
                )
            self._open[who] = held + 1

    def give_back(self, who: str) -> None:
        with self._lock:
            left = self._open.get(who, 0) - 1
            if left > 0:
                self._open[who] = left
            else:
                self._open.pop(who, None)


class Service:
    def __init__(self, settings: ShimSettings) -> None:
        self.settings = settings
        self.db: Database = open_database(settings.database_url, timeouts=settings.pg_timeouts)
        # Either process may be first on a fresh database: the shim creates the
        # tables it writes and the DBOS system tables it enqueues into.
        migrate(self.db)
        DBOS.migrate(settings.database_url)
        # On PostgreSQL the client's engine carries the same connection bounds.
        self._client_engine = system_engine(settings.database_url, settings.pg_timeouts)
        self.client = DBOSClient(
            system_database_url=settings.database_url,
            system_database_engine=self._client_engine,
            serializer=DBOSPortableJSONSerializer(),
        )
        self._enqueuer = work_queue.enqueuer(self.db)  # in our transactions
        self.watch = RunWatch(
            settings.database_url, postgres=not self.db.is_sqlite, timeouts=settings.pg_timeouts
        )
        # One refusal record written at a time (shim.api.services.refusals).
        self.refusals = threading.Lock()
        # The event streams each identity holds open in this shim (services.events).
        self.streams = StreamSlots(settings.max_event_streams)

    def hand_off(
        self,
        conn: Conn,
        run_id: str,
        decide: Callable[[JsonObject], JsonObject | None] | None = None,
        *,
        locked: stretches.Locked | None = None,
    ) -> bool:
        """Inside the transaction that wrote a decision, a cancel, a resolution or a
        message: a parked run is handed to its next stretch, enqueued in this same
        transaction (``decide``: a decision's, taken for the stretch here; see
        ``stretches.hand_off``; ``locked``: the run's row as the caller locked it).
        False for a run begun before runs were split: it
        waits in place, and the caller wakes it with a ``send`` once this commits."""
        version = self.settings.app_version
        taken = stretches.hand_off(
            conn, self._enqueuer, version, run_id, decide=decide, locked=locked
        )
        return taken.split

    def queue_run(self, conn: Conn, job: IntentJob, runs_for: str, *, notify: bool = True) -> None:
        """A new run's first stretch (an intent, a fork, an edit), queued in the
        transaction that wrote its rows, in the queue partition of whoever it runs
        for; the workers are told when it commits (``notify`` False: that transaction
        tells them already, ``intents.take_intent``)."""
        partition = queue_partition(runs_for)
        version = self.settings.app_version
        options = work_queue.enqueue_options(INTENT_WORKFLOW, job.run_id, version, partition)
        body = job.model_dump(mode="json")
        work_queue.queue_in_transaction(conn, self._enqueuer, options, body, notify=notify)

    def work_queued(self, partition: str) -> None:
        """After work was queued in this queue partition outside a transaction of
        ours (a replay, an explain): tell the workers now rather than at their next
        queue poll."""
        with self.db.engine.begin() as conn:
            work_queue.notify_work(conn, partition)

    def close(self) -> None:
        self.watch.close()
        self.client.destroy()
        self._enqueuer.destroy()
        if self._client_engine is not None:
            self._client_engine.dispose()
        self.db.dispose()
