"""Start and stop a worker: the only kind of process that runs workflows.

A worker migrates the database, keeps the policy files it runs with, launches
DBOS (``worker.durable``), starts its reaper and notifier, and runs until told
to stop.

A worker started while the database cannot be reached waits for it: each
attempt is logged and retried with a backoff capped at a few seconds, so a
worker and its database may come up in either order.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping

from contracts import DriverKind, GatehouseError, hide_url_secrets_in_logs, stop_on_signals
from ledger import (
    Database,
    database_unreachable,
    migrate,
    open_database,
    policy_versions,
    system_engine,
)
from ledger.policy_versions import PolicyVersion
from policies import catalog
from worker.coordinator import install_handlers
from worker.durable import UPKEEP, start_dbos, stop_dbos
from worker.handlers import Handler
from worker.handlers.opencode.supervisor import stop_running_server
from worker.notify import Notifier
from worker.runtime import (
    Reaper,
    Runtime,
    WorkerSettings,
    beating,
    install,
    runtime,
    say_stopped,
    set_tracing,
)

__all__ = ["LaunchStoppedError", "launch", "main", "shutdown"]

_log = logging.getLogger("gatehouse.worker")
_reapers: list[Reaper] = []
_notifiers: list[Notifier] = []

# Waiting for the database: first retry after this, doubling up to the cap.
_RETRY_FIRST_S = 0.25
_RETRY_CAP_S = 5.0


class LaunchStoppedError(Exception):
    """The worker was told to stop while it was still waiting for the database."""


def keep_catalog(db: Database) -> int:
    """Store the profiles, tool pools, recipes and Cedar policy sets this worker runs
    with, by digest, so a replay can hold each run to the versions it ran under; how
    many were new."""
    kept = [
        PolicyVersion(p.digest, kind, pid, p.text)
        for kind, loaded in (
            ("profile", [(x.model.profile_id, x) for x in catalog.list_profiles()]),
            ("tool_pool", [(x.model.tool_pool_id, x) for x in catalog.list_tool_pools()]),
            ("recipe", [(x.model.recipe_id, x) for x in catalog.list_recipes()]),
            ("cedar", [(x.model.policy_set_id, x) for x in catalog.list_cedar_policy_sets()]),
        )
        for pid, p in loaded
    ]
    with db.engine.begin() as conn:
        return policy_versions.keep(conn, kept)


def _launch_once(
    settings: WorkerSettings, handlers: Mapping[DriverKind, Handler] | None = None
) -> Runtime:
    db: Database = open_database(settings.database_url, timeouts=settings.pg_timeouts)
    sys_engine = system_engine(settings.database_url, settings.pg_timeouts)
    try:
        migrate(db)
        keep_catalog(db)
        # Alive before DBOS resumes anything, and all through the start: a reaper that
        # saw this worker's old heartbeat must not hand over the runs it is about to
        # recover itself, nor take a slow start for a death.
        with beating(settings, db):
            settings.workspace_root.mkdir(parents=True, exist_ok=True)
            set_tracing(settings.telemetry.enabled)
            install_handlers(handlers)
            rt = Runtime(settings=settings, db=db, sys_engine=sys_engine)
            install(rt)  # before DBOS resumes this worker's runs, which use it
            start_dbos(settings, db, sys_engine)
    except BaseException:
        db.dispose()
        if sys_engine is not None:
            sys_engine.dispose()
        raise
    return rt


def launch(
    settings: WorkerSettings,
    stop: threading.Event | None = None,
    handlers: Mapping[DriverKind, Handler] | None = None,
) -> Runtime:
    """Launch, waiting for the database as long as it takes (or until ``stop`` is set).

    ``handlers`` replaces the static registry: tests deliver to handlers of their own."""
    attempt = 0
    while True:
        attempt += 1
        try:
            rt = _launch_once(settings, handlers)
        except Exception as exc:
            if not database_unreachable(exc):
                raise
            delay = min(_RETRY_CAP_S, _RETRY_FIRST_S * 2 ** (attempt - 1))
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            _log.warning(
                "worker %s: the database is not reachable (attempt %d: %s: %s); retrying in %.1f s",
                settings.executor_id,
                attempt,
                type(exc).__name__,
                reason,
                delay,
            )
            waiter = stop if stop is not None else threading.Event()
            if waiter.wait(delay):
                raise LaunchStoppedError(
                    f"stopped after {attempt} attempt(s) to reach the database"
                ) from exc
            continue
        if attempt > 1:
            _log.warning(
                "worker %s: the database answered after %d attempts", settings.executor_id, attempt
            )
        reaper = Reaper(rt, UPKEEP, settings.heartbeat_s, settings.dead_after_s)
        reaper.start()
        _reapers.append(reaper)
        if settings.notifications is not None:
            notifier = Notifier(rt.db, settings.notifications, settings.executor_id)
            notifier.start()
            _notifiers.append(notifier)
        return rt


def shutdown(at: list[str] | None = None) -> None:
    """Stop the reaper, the notifier, DBOS and the OpenCode server, say so, let go of
    the database. ``at`` (its one item) is kept saying which part is being stopped."""
    where = at if at is not None else [""]
    rt = runtime()
    where[0] = "the reaper"
    while _reapers:
        reaper = _reapers.pop()
        reaper.stop.set()
        reaper.join(timeout=10)
    where[0] = "the notifier"
    while _notifiers:
        notifier = _notifiers.pop()
        notifier.stop.set()
        notifier.join(timeout=30)
    where[0] = "DBOS"
    stop_dbos()
    where[0] = "the OpenCode server"
    stop_running_server()  # the OpenCode server stops with its worker
    where[0] = "the clean-stop mark"
    say_stopped(rt.settings, rt.db)
    where[0] = "the database connections"
    rt.db.dispose()
    if rt.sys_engine is not None:
        rt.sys_engine.dispose()  # DBOS does not dispose of an engine it was given


# A stop that takes longer than this ends the process where it is, saying which part
# held it up: well inside `gatehouse up`'s 10 s grace, so the worker exits rather than
# being killed. Everything a run needs is in the database already (as after kill -9).
# A stop takes 0.0-0.4 s; the limit leaves 4 s for a starved process. (Workers that
# outlived the grace in the loaded e2e run were not slow: their signal handler had
# deadlocked on its own event's lock, which contracts.stop_on_signals now rules out.)
SHUTDOWN_LIMIT_S = 6.0


def _cut_short(at: list[str]) -> None:
    os.write(2, f"worker: stopping {at[0]} took too long; exiting now\n".encode())
    os._exit(0)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(message)s")
    # httpx logs every request at INFO: an http step's, a webhook's, the model's URL
    hide_url_secrets_in_logs()
    try:
        settings = WorkerSettings.from_env()
    except GatehouseError as exc:  # config_invalid, or a setting out of range
        sys.stderr.write(f"gatehouse worker: {exc.message}\n")
        sys.exit(1)
    try:
        # Read before the database is waited for: a bad file is the operator's to fix,
        # and no retry would mend it.
        catalog.load_all()
    except catalog.PolicyFileError as exc:
        sys.stderr.write(f"gatehouse worker: {exc}\n")
        sys.exit(1)
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        launch(settings, stop)
    except LaunchStoppedError as exc:
        _log.info("worker %s: %s", settings.executor_id, exc)
        logging.shutdown()
        os._exit(0)
    _log.info("worker %s ready (version %s)", settings.executor_id, settings.app_version)
    stop.wait()
    at = [""]
    limit = threading.Timer(SHUTDOWN_LIMIT_S, _cut_short, args=(at,))
    limit.daemon = True
    limit.start()
    started = time.monotonic()
    shutdown(at)
    limit.cancel()
    _log.info("worker %s stopped in %.1f s", settings.executor_id, time.monotonic() - started)
    logging.shutdown()
    # A workflow blocked in a durable wait keeps a DBOS thread for up to the
    # profile's recheck_s. Its state is in the database and any worker with this
    # executor id resumes it, so exit now instead of waiting for that thread.
    os._exit(0)
