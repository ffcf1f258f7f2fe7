"""Start and stop a worker: the only kind of process that runs workflows.

A worker migrates the database, launches DBOS listening on ``intentQ`` with
its own stable executor id and the explicit application version, and runs
until told to stop. All workflow and step data is stored as portable JSON.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from dbos import DBOS, DBOSConfig, SQLAlchemyDatasource
from dbos._serialization import DBOSPortableJSON

from contracts import INTENT_QUEUE
from ledger import migrate, open_database
from worker import workflow as _workflow  # registers the workflow with DBOS
from worker._reaper import Reaper
from worker._runtime import Runtime, install, runtime
from worker.settings import WorkerSettings

__all__ = ["dbos_config", "launch", "main", "shutdown"]

_log = logging.getLogger("gatehouse.worker")
_ = _workflow
_reapers: list[Reaper] = []


def dbos_config(settings: WorkerSettings) -> DBOSConfig:
    return {
        "name": "gatehouse",
        "system_database_url": settings.database_url,
        "serializer": DBOSPortableJSON,
        "application_version": settings.app_version,
        "executor_id": settings.executor_id,
        "log_level": "WARNING",
        "sys_db_pool_size": 10,
    }


def launch(settings: WorkerSettings) -> Runtime:
    db = open_database(settings.database_url)
    migrate(db)
    settings.workspace_root.mkdir(parents=True, exist_ok=True)
    DBOS(config=dbos_config(settings))
    ds = SQLAlchemyDatasource.create(
        settings.database_url, engine=db.engine, serializer=DBOSPortableJSON
    )
    rt = Runtime(settings=settings, db=db, ds=ds)
    install(rt)
    DBOS.listen_queues([INTENT_QUEUE])
    DBOS.launch()
    DBOS.register_queue(
        INTENT_QUEUE,
        worker_concurrency=settings.worker_concurrency,
        polling_interval_sec=settings.queue_poll_s,
    )
    reaper = Reaper(rt, settings.heartbeat_s, settings.dead_after_s)
    reaper.start()
    _reapers.append(reaper)
    return rt


def shutdown() -> None:
    rt = runtime()
    while _reapers:
        reaper = _reapers.pop()
        reaper.stop.set()
        reaper.join(timeout=10)
    DBOS.destroy(workflow_completion_timeout_sec=0)
    rt.db.dispose()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(message)s")
    settings = WorkerSettings.from_env()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    launch(settings)
    _log.info("worker %s ready (version %s)", settings.executor_id, settings.app_version)
    stop.wait()
    shutdown()
    logging.shutdown()
    # A workflow blocked in a durable wait keeps a DBOS thread for up to the
    # profile's recheck_s. Its state is in the database and any worker with this
    # executor id resumes it, so exit now instead of waiting for that thread.
    os._exit(0)
