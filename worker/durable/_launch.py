"""Starting and stopping DBOS in a worker: its settings, the workflows, the queue.

A worker launches DBOS listening on ``intentQ`` with its own stable executor id
and the explicit application version; all workflow and step data is stored as
portable JSON. The queue is partitioned by submitter (``contracts.queue_partition``):
a worker runs at most ``GATEHOUSE_WORKER_SHARE`` of one partition's workflows at once.
"""

from __future__ import annotations

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig, DBOSPortableJSONSerializer, SQLAlchemyDatasource

from contracts import INTENT_QUEUE
from ledger import Database, add_missing_views, wake_folder
from worker.durable._dbos import hold_queue_listing, quiet_background
from worker.durable._expiry import close_client
from worker.durable._state import set_datasource
from worker.durable._wake import WorkWake, inhost_ear, postgres_ear
from worker.durable._workflows import register
from worker.runtime import WorkerSettings

__all__ = ["dbos_config", "start_dbos", "stop_dbos", "wakes_heard"]

# DBOS's system-database pool on SQLite, where DBOS makes its own engine (on
# PostgreSQL it is given ``ledger.system_engine``, sized by GATEHOUSE_PG_POOL_SIZE).
SYS_DB_POOL_SIZE = 10

# This process's listener for new work (PostgreSQL), stopped before DBOS is.
_wakes: list[WorkWake] = []

# Workflow and step data as JSON, never pickle (DBOS's portable JSON format).
_SERIALIZER = DBOSPortableJSONSerializer()


def dbos_config(settings: WorkerSettings, engine: sa.Engine | None = None) -> DBOSConfig:
    """DBOS's settings; ``engine`` (``ledger.system_engine``, PostgreSQL) is the
    system-database engine DBOS uses instead of making one, so its connections
    carry Gatehouse's connection bounds (GATEHOUSE_PG_*) too. None: SQLite, where
    DBOS makes its own."""
    traces = settings.telemetry
    config: DBOSConfig = {
        "name": "gatehouse",
        "system_database_url": settings.database_url,
        "system_database_engine": engine,
        "serializer": _SERIALIZER,
        "application_version": settings.app_version,
        "executor_id": settings.executor_id,
        "log_level": "WARNING",
        "sys_db_pool_size": SYS_DB_POOL_SIZE,
        # SQLite has no LISTEN/NOTIFY: DBOS polls for the messages that wake waits.
        "notification_listener_polling_interval_sec": settings.wake_poll_s,
        # OpenTelemetry: a span per run and per step, exported over OTLP/HTTP when
        # endpoints are named, else to the tracer provider this process installed.
        "enable_otlp": traces.enabled,
        "otlp_traces_endpoints": list(traces.traces_endpoints) or None,
        "otlp_attributes": {"gatehouse.executor_id": settings.executor_id, **traces.attributes},
    }
    if engine is None:
        # SQLite, where DBOS makes its engine: a file has no session to lose, so no
        # statement is sent to check a pooled connection before each transaction
        # (DBOS's default, pool_pre_ping), as Gatehouse's own SQLite pool sends none.
        config["db_engine_kwargs"] = {"pool_pre_ping": False}
    return config


def start_dbos(settings: WorkerSettings, db: Database, sys_engine: sa.Engine | None) -> None:
    """Construct and launch DBOS (it resumes this executor's runs); undone if it fails
    half-way, so the next attempt starts clean."""
    register()
    DBOS(config=dbos_config(settings, sys_engine))
    try:
        ds = SQLAlchemyDatasource.create(
            settings.database_url, engine=db.engine, serializer=_SERIALIZER
        )
        set_datasource(ds)
        # The wake thread is the one claimer of the intent queue (its notifications
        # and its fallback poll): DBOS's queue thread is not started for it, so two
        # claims never count the same free slot (worker.durable._wake). A SQLite
        # database with no file (nothing to tell its workers by) leaves it to DBOS.
        folder = wake_folder(settings.database_url)
        ear = (
            postgres_ear(settings.database_url, settings.pg_timeouts)
            if not db.is_sqlite
            else None
            if folder is None
            else inhost_ear(folder)
        )
        DBOS.listen_queues([] if ear is not None else [INTENT_QUEUE])
        # DBOS's own chores run when the heartbeat sees them due, by the wake thread
        quiet_background(ear is not None)
        DBOS.launch()
        add_missing_views(db)  # those over DBOS's tables, which exist from here on
        DBOS.register_queue(
            INTENT_QUEUE,
            worker_concurrency=settings.worker_concurrency,
            # partitioned by submitter: one submitter's work holds at most this many
            partition_worker_concurrency=settings.worker_share,
            polling_interval_sec=settings.queue_poll_s,
        )
        if ear is not None:  # told of new work at once; the poll is the fallback
            hold_queue_listing()
            wake = WorkWake(ear, settings.queue_poll_s)
            wake.start()
            _wakes.append(wake)
    except BaseException:
        # A half-launched DBOS holds threads and connections.
        DBOS.destroy(workflow_completion_timeout_sec=0)
        raise


def stop_dbos() -> None:
    while _wakes:
        _wakes.pop().stop()
    close_client()
    DBOS.destroy(workflow_completion_timeout_sec=0)


def wakes_heard() -> int:
    """How many times this process's worker was told of new work."""
    return sum(w.woken for w in _wakes)
