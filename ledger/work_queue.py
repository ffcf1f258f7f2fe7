"""Work for the workers: a workflow put on the queue in the caller's transaction, in
its submitter's partition, and the workers told when it commits (PostgreSQL
``NOTIFY``; on SQLite a datagram to each worker on the host, ``ledger._inhost``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts import INTENT_QUEUE, JsonValue
from ledger._db import Conn, Database, is_postgres, sql
from ledger._inhost import after_transaction
from ledger._statement import execute

if TYPE_CHECKING:  # the CLI imports the ledger; DBOS is loaded only where a client is made
    from dbos import DBOSClient, EnqueueOptions

__all__ = [
    "ANY_PARTITION",
    "WORK_CHANNEL",
    "enqueue_options",
    "enqueuer",
    "notify_work",
    "queue_in_transaction",
]

# Where workers hear of new queued work (PostgreSQL NOTIFY, delivered at commit);
# the payload is the queue partition the work was put in.
WORK_CHANNEL = "gatehouse_work"
# The payload of a notification about work in any partitions (runs put back on the
# queue: a dead worker's, those a full disk stopped): look at every partition.
ANY_PARTITION = ""
_NOTIFY = sql("SELECT pg_notify(:c, :w)")


def enqueue_options(
    workflow_name: str, workflow_id: str, app_version: str, partition: str
) -> EnqueueOptions:
    """How a workflow is put on ``INTENT_QUEUE``: in the partition of whoever it
    runs for (``contracts.queue_partition``), so each worker gives one submitter at
    most its share of slots (``GATEHOUSE_WORKER_SHARE``)."""
    return {
        "workflow_name": workflow_name,
        "queue_name": INTENT_QUEUE,
        "workflow_id": workflow_id,
        "app_version": app_version,
        "queue_partition_key": partition,
    }


def enqueuer(db: Database) -> DBOSClient:
    """The DBOS client for ``queue_in_transaction`` in ``db``'s transactions. It is
    bound to ``db``'s own engine because DBOS compiles its queue insert once, for its
    engine's dialect, and builds and compiles it again on every call for a connection
    of another engine: on PostgreSQL that was about a sixth of the shim's CPU per
    intent. Lazy: it opens no connection of its own, and so holds none of ``db``'s
    pool; it writes only in the transaction it is given."""
    from dbos import DBOSClient, DBOSPortableJSONSerializer  # noqa: PLC0415 (see above)

    return DBOSClient(
        system_database_engine=db.engine, serializer=DBOSPortableJSONSerializer(), lazy=True
    )


def queue_in_transaction(
    conn: Conn,
    client: DBOSClient,
    options: EnqueueOptions,
    *args: JsonValue,
    notify: bool = True,
) -> None:
    """Queue a workflow (``enqueue_options``) in the transaction ``conn`` is in, and
    tell the workers when it commits (``notify_work``, in its partition; ``notify``
    False: the caller's transaction tells them already). ``client``: ``enqueuer`` of
    the database ``conn`` is from."""
    client.enqueue_in_transaction(conn, options, *args)
    if notify:
        notify_work(conn, options["queue_partition_key"])


def notify_work(conn: Conn, partition: str) -> None:
    """Inside the transaction that queues work for workers, in this queue
    partition: tell them when it commits (PostgreSQL ``NOTIFY``; on SQLite a
    datagram to each worker on the host once the transaction is over,
    ``ledger._inhost``)."""
    if is_postgres(conn):
        execute(conn, _NOTIFY, {"c": WORK_CHANNEL, "w": partition})
        return
    after_transaction(conn.info, partition)
