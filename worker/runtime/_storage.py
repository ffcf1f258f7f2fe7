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

from ledger import storage_full

__all__ = ["resumed", "stranded", "stranded_now", "wait_for_space"]

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


# Runs whose workflow a full disk stopped mid-way (see ``stranded``).
_stranded: set[str] = set()
_lock = threading.Lock()


def stranded(workflow_id: str) -> None:
    """A write DBOS makes itself (a datasource transaction, a step's checkpoint) found the
    disk full and ended the workflow's thread; DBOS could not record an outcome on the
    same disk either, so the workflow stays PENDING with nothing running it. Noted here,
    it is resumed once the database takes writes again (``worker.durable``'s
    ``resume_stranded``, called by the reaper every tick)."""
    _log.warning("run %s stopped on a full disk; it resumes once space is freed", workflow_id)
    with _lock:
        _stranded.add(workflow_id)


def stranded_now() -> list[str]:
    """The workflows ``stranded`` noted and not yet resumed, in order."""
    with _lock:
        return sorted(_stranded)


def resumed(workflow_id: str) -> None:
    """A stranded workflow is back on a queue."""
    with _lock:
        _stranded.discard(workflow_id)
