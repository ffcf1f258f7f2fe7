"""Waiting out a full disk, in place.

A write of ours that finds its disk full (SQLite's "database or disk is full", ENOSPC
from a workspace or the anchor file: ``ledger.storage_full``) is tried again,
in the same process and with what it was about to write still in hand, until
space is freed. Giving up instead would fail the step, and with it the run,
for want of space an operator can free; and a step that let the error escape
would leave DBOS to record an outcome on the same full disk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from dbos import DBOS
from dbos._datasource import SQLAlchemyDatasource

from contracts import INTENT_QUEUE
from ledger import Database, executors, storage_full

__all__ = [
    "requeue_orphaned",
    "resume_stranded",
    "stranded",
    "wait_for_space",
    "wait_out_full_disk",
]

T = TypeVar("T")

_log = logging.getLogger("gatehouse.storage")
_FIRST_S = 0.5
_CAP_S = 4.0


def wait_for_space(what: str, fn: Callable[[], T]) -> T:
    """``fn()``, tried again while it fails for a full disk (any other error is raised)."""
    delay = _FIRST_S
    while True:
        try:
            return fn()
        except Exception as exc:
            if not storage_full(exc):
                raise
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            _log.warning("%s: the disk is full (%s); retrying in %.1f s", what, first, delay)
            time.sleep(delay)
            delay = min(_CAP_S, delay * 2)


def wait_out_full_disk(ds: SQLAlchemyDatasource) -> None:
    """Have the datasource's transactions (``atomic_tx``) wait a full disk out in place.

    DBOS tries a datasource transaction again, with a capped backoff, when its commit
    fails for a reason it deems transient, and otherwise records the failure as the
    step's outcome, for good: a run whose gate or finish found the disk full would
    replay that failure on every resume. A full disk is transient (an operator frees
    space), so it joins the errors DBOS tries again."""
    deemed_transient = ds._is_serialization_error

    def transient(error: Exception) -> bool:
        return deemed_transient(error) or storage_full(error)

    setattr(ds, "_is_serialization_error", transient)  # noqa: B010  (an instance's hook)


# Runs whose workflow a full disk stopped mid-way (see ``stranded``).
_stranded: set[str] = set()
_lock = threading.Lock()


def stranded(workflow_id: str) -> None:
    """A write DBOS makes itself (a datasource transaction, a step's checkpoint) found the
    disk full and ended the workflow's thread; DBOS could not record an outcome on the
    same disk either, so the workflow stays PENDING with nothing running it. Noted here,
    it is resumed once the database takes writes again (``resume_stranded``)."""
    _log.warning("run %s stopped on a full disk; it resumes once space is freed", workflow_id)
    with _lock:
        _stranded.add(workflow_id)


def resume_stranded(db: Database) -> list[str]:
    """Put every stranded workflow back on a queue (DBOS runs it on from its checkpoints:
    the step whose write failed was never recorded, so it runs again). Those still
    stranded (the disk is still full) stay noted. Called by the reaper every tick.
    A workflow whose error DBOS did manage to record (``ERROR``, which
    ``resume_workflow`` leaves alone) is put back on the queue the same way."""
    with _lock:
        waiting = sorted(_stranded)
    resumed = []
    for workflow_id in waiting:
        try:
            DBOS.resume_workflow(workflow_id, queue_name=INTENT_QUEUE)
            with db.engine.begin() as conn:
                executors.requeue_errored(conn, workflow_id, INTENT_QUEUE)
        except Exception as exc:
            if not storage_full(exc):
                raise
            break
        resumed.append(workflow_id)
        with _lock:
            _stranded.discard(workflow_id)
    if resumed:
        _log.warning("resumed %d run(s) stopped by a full disk", len(resumed))
    return resumed


def requeue_orphaned(db: Database, app_version: str) -> list[str]:
    """Put back on the queue the runs of ``app_version`` that DBOS ended in ``ERROR``
    for a full disk and that never ended, whoever's they were. ``stranded`` notes a
    run in its worker's memory only (the disk is full: nothing can be written), so a
    worker that dies before space is freed would leave its runs ``running`` for good;
    the reaper's leader calls this every tick. While the disk is still full nothing
    changes, and it tries again next tick."""
    try:
        with db.engine.begin() as conn:
            found = executors.errored_on_full_disk(conn, app_version)
            requeued = [w for w in found if executors.requeue_errored(conn, w, INTENT_QUEUE)]
    except Exception as exc:
        if not storage_full(exc):
            raise
        return []
    if requeued:
        _log.warning("re-queued %d run(s) a full disk had ended in DBOS", len(requeued))
    return requeued
