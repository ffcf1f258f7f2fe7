"""The one module that reaches into DBOS Transact's private API (pinned: dbos 3.4.0).

Everything else in Gatehouse uses ``dbos``'s public names. Each use here says
why no public name does the job; a DBOS upgrade checks these first.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Generic, NoReturn, TypeVar

# Where DBOS looks up, at launch, the function it starts as its background jobs
# thread (delayed workflows made ready, workflow deadlines enforced).
import dbos._dbos as _dbos_module
from dbos import DBOS, Queue, SQLAlchemyDatasource

# One pass of the queue's claim and dispatch (``dequeue_now``): the calls DBOS's
# queue thread makes, which DBOS does not expose.
from dbos._core import execute_dequeued_workflow

# A step's checkpoint keyed and read back as DBOS's datasource does, inside a
# transaction of Gatehouse's own (``step_checkpoint``, ``checkpoint_step``): its
# ``run_tx_step`` reads it in a transaction of its own first and asks the system
# database who owns the workflow before it commits, two round trips more a step.
from dbos._datasource import RecordedResult, _checkpoint_id, _replay_recorded
from dbos._dbos import _get_dbos_instance

# What DBOS raises in a workflow it finds cancelled at a step's start: raised by a
# record or a call of ours (no DBOS step) that finds it so, DBOS ends the execution
# as it would have (``step_start``).
from dbos._error import DBOSWorkflowCancelledError

# The internal queue's poll interval as DBOS makes it (``quiet_background``).
from dbos._queue import DEFAULT_QUEUE_POLLING_INTERVAL_SEC
from dbos._serialization import serialize_value
from dbos._sys_db import SystemDatabase
from dbos._utils import INTERNAL_QUEUE_NAME, GlobalParams, generate_uuid

# DBOS starts its background jobs thread with this function, and its deadline sweep
# cancels this many workflows a transaction (``quiet_background``, ``dbos_chores``).
from dbos._workflow_commands import _SWEEP_BATCH_SIZE, background_jobs_thread
from sqlalchemy.exc import DBAPIError

from contracts import JsonObject
from ledger import Conn, checkpoints

__all__ = [
    "DBOS_INTERNAL_QUEUE",
    "StepKey",
    "checkpoint_step",
    "dbos_application",
    "dbos_chores",
    "dequeue_now",
    "hold_queue_listing",
    "quiet_background",
    "raise_cancelled",
    "recover_pending_workflows",
    "step_checkpoint",
    "step_start",
]

T = TypeVar("T")

# The queue DBOS puts the workflows of ``dbos workflow resume`` and ``fork`` on.
DBOS_INTERNAL_QUEUE = INTERNAL_QUEUE_NAME


def recover_pending_workflows(executor_ids: list[str]) -> list[str]:
    """Re-enqueue every PENDING workflow of these (dead) executors, so a live worker
    adopts each; the ids of those handed over. DBOS 3.4 has no public call for
    this: its own recovery only runs at a process's start, for its own id."""
    return [h.get_workflow_id() for h in DBOS._recover_pending_workflows(executor_ids)]


# What Gatehouse asks of DBOS's machinery it does not use (see ``quiet_background``).
_LISTING_S = 30.0
_INTERNAL_POLL_S = 30.0  # DBOS's internal queue: its own poll, the last resort


def _no_background_jobs(stop_event: threading.Event, dbos: DBOS) -> None:
    """What DBOS starts as its background jobs thread once ``quiet_background`` ran:
    nothing (``dbos_chores`` runs those jobs when a heartbeat saw them due)."""


# DBOS's own, as this module found them: what a worker with no wake thread keeps.
_DBOS_JOBS = background_jobs_thread


def quiet_background(quiet: bool) -> None:
    """Before ``DBOS.launch``. On a worker whose wake thread claims its work
    (``worker.durable._wake``; ``quiet``): DBOS's own chores run when there is
    something for them, as the reaper's heartbeat sees it
    (``ledger.executors.waiting``, one statement in a transaction it commits
    anyway), not on DBOS's clock. Otherwise (``quiet`` False) DBOS's own ways.

    DBOS 3.4 runs its background jobs (delayed workflows made ready, workflow
    deadlines enforced: three transactions, the jobs' advisory lock included) once a
    second, and polls its internal queue (where ``dbos workflow resume`` and
    ``fork`` put workflows) once a second, whether or not anything uses them: most
    of what an idle worker cost the database. The jobs thread DBOS starts does
    nothing here (its function is a module global of ``dbos._dbos``, read at
    launch); the internal queue's own poll runs every ``_INTERNAL_POLL_S`` as the
    last resort (its interval is an attribute of the in-memory queue object, which
    outlives a DBOS instance: set either way)."""
    setattr(_dbos_module, "background_jobs_thread", _no_background_jobs if quiet else _DBOS_JOBS)  # noqa: B010  (a module's global)
    internal = _get_dbos_instance()._registry.get_internal_queue()
    internal._polling_interval_sec = (
        _INTERNAL_POLL_S if quiet else DEFAULT_QUEUE_POLLING_INTERVAL_SEC
    )


def dbos_application() -> str | None:
    """The application name this process's DBOS acts for (None: every one), as its
    background jobs filter the rows they touch."""
    name = _get_dbos_instance()._sys_db.app_name
    return str(name) if name else None


def dbos_chores() -> None:
    """DBOS's own work, run now in this thread (the heartbeat saw it due): its two
    background jobs (delayed workflows whose delay is over made ready, workflows past
    their deadline cancelled, in batches as DBOS's sweep does), then one claim pass
    of its internal queue."""
    sys_db = _get_dbos_instance()._sys_db
    sys_db.transition_delayed_workflows()
    while len(sys_db.cancel_timed_out_workflows(_SWEEP_BATCH_SIZE)) >= _SWEEP_BATCH_SIZE:
        pass
    dequeue_now(DBOS_INTERNAL_QUEUE)


def hold_queue_listing() -> None:
    """After ``DBOS.launch``, on a worker that listens to none of the application's
    queues (``DBOS.listen_queues([])``: Gatehouse's wake thread claims its work):
    DBOS's queue thread lists the queues every second, to start a poller for any new
    one it listens to, and so discards the answer; the list is read at most every
    ``_LISTING_S`` instead (any other caller in this process is answered as late).
    The interval is a local variable of that thread, and the list a method of the
    system database object: replaced on the instance."""
    sys_db = _get_dbos_instance()._sys_db
    read = sys_db.list_queues
    held: _Held[list[Queue]] = _Held(_LISTING_S)

    def listed(*args: Any, **kwargs: Any) -> list[Queue]:
        return held.get(sys_db, lambda: read(*args, **kwargs)) or []

    setattr(sys_db, "list_queues", listed)  # noqa: B010  (an instance's method)


# What a claim reads of DBOS's tables that seldom changes, as last read and when
# (monotonic), so that a pass on every hand-off need not read it again (a round trip
# each on approve → first step): the queue's settings, and whether this worker runs
# the application's newest version. DBOS's own poll re-reads both every pass, so a
# change (a queue's limits, another worker's newer version) is seen within _HELD_S;
# until then this worker may still claim work queued with no version, as before.
_HELD_S = 5.0


class _Held(Generic[T]):
    """One such answer, held per DBOS instance (a process that launches DBOS again,
    as tests do, reads anew) for ``held_s``."""

    def __init__(self, held_s: float = _HELD_S) -> None:
        self._held_s = held_s
        self._at = 0.0
        self._sys_db: SystemDatabase | None = None
        self._value: T | None = None

    def get(self, sys_db: SystemDatabase, read: Callable[[], T | None]) -> T | None:
        """``read()``, or its answer of under ``held_s`` ago (None is never held)."""
        now = time.monotonic()
        if self._value is not None and self._sys_db is sys_db and now - self._at < self._held_s:
            return self._value
        self._at, self._sys_db, self._value = now, sys_db, read()
        return self._value


_queues: dict[str, _Held[Queue]] = {}
_latest: _Held[bool] = _Held()


def _queue(dbos: DBOS, name: str) -> Queue | None:
    """The queue's settings: DBOS's internal queue lives in memory, the rest in its
    tables."""
    if name == DBOS_INTERNAL_QUEUE:
        return dbos._registry.get_internal_queue()
    sys_db = dbos._sys_db
    return _queues.setdefault(name, _Held()).get(sys_db, lambda: sys_db.get_queue(name))


def _is_latest(sys_db: SystemDatabase) -> bool:
    version = GlobalParams.app_version
    return bool(_latest.get(sys_db, lambda: sys_db._is_latest_version(version)))


def dequeue_now(queue_name: str, partitions: Collection[str] | None = None) -> bool:
    """One pass of DBOS's own queue poll for ``queue_name``, now, in this thread: the
    queued workflows this worker has room for (its ``worker_concurrency``, and for
    each partition its ``partition_worker_concurrency``) claimed and started. DBOS's
    queue thread polls at a fixed interval and has no way to be woken (its wait is
    on the process's stop event), so a worker told of new work
    (``worker.durable._wake``) claims it here with the calls that thread makes:
    the same claims (rows locked, counted against the same limits), partition by
    partition in a random order as that thread goes, the same dispatch. Only
    ``partitions`` are looked at when named (those the notifications named), else
    every partition with queued work. A claim that meets another's lock leaves
    that partition to it. True when more may be waiting: the worker or a
    partition was full, or took all it had room for."""
    dbos = _get_dbos_instance()
    sys_db = dbos._sys_db
    queue = _queue(dbos, queue_name)
    if queue is None:
        return False
    active = dbos._active_workflows_set
    running = active.count_for_queue(queue_name)
    limit = queue._worker_concurrency
    if limit is not None and running >= limit:
        return True
    if not queue._has_partition_limits():
        return _claim(dbos, queue, None, running, 0)[1]
    keys = list(sys_db.get_queue_partitions(queue_name) if partitions is None else partitions)
    random.shuffle(keys)
    more = False
    for key in keys:
        if limit is not None and running >= limit:
            return True
        theirs = active.count_for_partition(queue_name, key)
        claimed, full = _claim(dbos, queue, key, running, theirs)
        running += claimed
        more = more or full
    return more


def _claim(
    dbos: DBOS, queue: Queue, key: str | None, running: int, theirs: int
) -> tuple[int, bool]:
    """Claim and start what this worker has room for in one partition (``key``; None:
    an unpartitioned queue), given how many of the queue's (``running``) and the
    partition's (``theirs``) workflows it runs; (how many, whether it was full or
    took all it had room for)."""
    sys_db = dbos._sys_db
    rooms = [] if queue._worker_concurrency is None else [queue._worker_concurrency - running]
    share = None if key is None else queue._partition_worker_concurrency
    rooms += [] if share is None else [share - theirs]
    owner = generate_uuid()
    try:
        ids, stopped = sys_db.start_queued_workflows(
            queue, GlobalParams.executor_id, GlobalParams.app_version, key, running, theirs,
            owner_xid=owner, is_latest_version=_is_latest(sys_db),
        )  # fmt: skip
    except DBAPIError as exc:
        if sys_db.is_lock_conflict(exc) or sys_db.is_serialization_conflict(exc):
            return 0, True  # another claim holds it right now: look again soon
        raise
    found = {st["workflow_uuid"]: st for st in sys_db.get_workflow_statuses(ids)} if ids else {}
    for workflow_id in ids:
        status = found.get(workflow_id) or sys_db.get_workflow_status(workflow_id)
        if status is not None:
            execute_dequeued_workflow(dbos, status, owner)
    full = stopped is not None or (bool(rooms) and bool(ids) and len(ids) >= min(rooms))
    return len(ids), full


# A record's checkpoint key: its workflow's id and its step id (a record of ours,
# ``worker.durable._tx``: negative; a DBOS step's function id: not).
StepKey = tuple[str, int]


def raise_cancelled(workflow_id: str) -> NoReturn:
    """Raise what DBOS raises at a step's start in a workflow it holds CANCELLED."""
    raise DBOSWorkflowCancelledError(f"Workflow {workflow_id} is cancelled")


def step_checkpoint(conn: Conn, ds: SQLAlchemyDatasource, key: StepKey) -> JsonObject | None:
    """Step ``key``'s output, from its checkpoint (``ledger.checkpoints``; a recorded
    error is raised again); None when it has none. Keyed and read as DBOS's datasource
    ``ds`` keys and reads it."""
    return _recorded(key, checkpoints.read(conn, _checkpoint_id(key[0]), key[1]), ds)


def step_start(conn: Conn, ds: SQLAlchemyDatasource, key: StepKey) -> JsonObject | None:
    """A record's start in its own transaction, in one statement: what DBOS raises at
    a step's start if it holds the record's workflow CANCELLED (``dbos workflow
    cancel``: the execution stops there, nothing of the transaction committed, DBOS
    records no outcome over the cancel and the reaper then ends the run,
    ``worker.durable._cancel``); else ``step_checkpoint``."""
    status, row = checkpoints.look(conn, key[0], _checkpoint_id(key[0]), key[1])
    if status == "CANCELLED":
        raise_cancelled(key[0])
    return _recorded(key, row, ds)


def _recorded(
    key: StepKey, row: checkpoints.Row | None, ds: SQLAlchemyDatasource
) -> JsonObject | None:
    if row is None:
        return None
    recorded: RecordedResult = {"output": row[0], "error": row[1], "serialization": row[2]}
    output = _replay_recorded(recorded, ds.serializer)
    if not isinstance(output, dict):
        raise TypeError(f"step {key}'s checkpoint holds {type(output).__name__}, not an object")
    return output


def checkpoint_step(conn: Conn, ds: SQLAlchemyDatasource, key: StepKey, output: JsonObject) -> bool:
    """Write step ``key``'s checkpoint in ``conn``'s transaction, serialized and keyed
    as DBOS's datasource ``ds`` does; False when another execution of the step wrote
    one first: this one must roll back."""
    serialized, serialization = serialize_value(output, None, ds.serializer)
    return checkpoints.write(conn, _checkpoint_id(key[0]), key[1], serialized, serialization)
