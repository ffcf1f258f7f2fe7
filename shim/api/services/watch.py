"""Waking the requests that wait on a run when its status may have changed.

On PostgreSQL every status change is announced by the transaction that makes
it (``ledger.runs.STATUS_CHANNEL``, delivered at commit) and one listening
connection per shim wakes the requests waiting on that run; each then reads
the run's status (one indexed row) and answers or waits again. A lost
connection is re-opened, and every waiter also looks again every
``_PG_RECHECK_S``, so a missed announcement costs at most that. SQLite has no
announcements: a waiter reads the status every ``_SQLITE_RECHECK_S`` — one
row from a local file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable

import psycopg

from contracts import RunStatus
from ledger import PgTimeouts, pg_connect, runs

__all__ = ["RunWatch"]

_log = logging.getLogger("gatehouse.shim.wait")

_PG_RECHECK_S = 0.5
_SQLITE_RECHECK_S = 0.01
_LISTEN_RETRY_S = 1.0


class RunWatch:
    """Wakes the requests waiting on a run when its status may have changed."""

    def __init__(
        self, database_url: str, postgres: bool, timeouts: PgTimeouts | None = None
    ) -> None:
        self._url = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._postgres = postgres
        self._timeouts = timeouts or PgTimeouts()
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    async def wait(
        self,
        run_id: str,
        status: Callable[[], Awaitable[RunStatus | None]],
        until: frozenset[RunStatus],
        timeout_s: float,
    ) -> bool:
        """Until ``status()`` is one of ``until`` (True) or ``timeout_s`` passed (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        entry = self._register(run_id)
        woken = entry[1]
        recheck = _PG_RECHECK_S if self._postgres else _SQLITE_RECHECK_S
        try:
            while True:
                woken.clear()
                now = await status()
                if now is None or now in until:
                    return True
                left = deadline - loop.time()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):  # looked at again, woken or not
                    await asyncio.wait_for(woken.wait(), timeout=min(left, recheck))
        finally:
            self._forget(run_id, entry)

    async def nudged(self, run_id: str, timeout_s: float) -> None:
        """Return when the run's status may have changed, or after ``timeout_s``."""
        entry = self._register(run_id)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry[1].wait(), timeout=timeout_s)
        finally:
            self._forget(run_id, entry)

    def _register(self, run_id: str) -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
        """A wake-up for this run's next announced change (call from the event loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        if self._postgres:
            self._listen()
        with self._lock:
            self._waiters.setdefault(run_id, set()).add(entry)
        return entry

    def _forget(self, run_id: str, entry: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
        with self._lock:
            entries = self._waiters.get(run_id)
            if entries is not None:
                entries.discard(entry)
                if not entries:
                    del self._waiters[run_id]

    # ------------------------------------------------------------ PostgreSQL
    def _listen(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen_loop, name="gatehouse-run-watch", daemon=True
                )
                self._thread.start()

    def _wake(self, run_id: str) -> None:
        with self._lock:
            entries = list(self._waiters.get(run_id, ()))
        for loop, woken in entries:
            loop.call_soon_threadsafe(woken.set)

    def _listen_loop(self) -> None:
        while not self._stop.is_set():
            try:
                with pg_connect(self._url, self._timeouts, autocommit=True) as conn:
                    conn.execute(f"LISTEN {runs.STATUS_CHANNEL}")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._wake(note.payload)
            except psycopg.Error as exc:
                _log.warning("run watch: the listening connection failed (%s); reopening", exc)
                self._stop.wait(_LISTEN_RETRY_S)
