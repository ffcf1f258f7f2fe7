"""The shim's tokens, following the tokens file without a restart.

At most once every ``recheck_s`` (1 s) a request looks at the file's inode,
size and modification time; when they changed, the file is read again. The
CLI replaces the file by rename, so a read sees a whole version. A version
that does not load (an editor's half-saved file, a typo, the file removed)
is logged and the last good tokens stay in force until a good one arrives:
a broken file neither locks everyone out nor lets anyone in.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from shim.tokens._file import Clock, utc_now
from shim.tokens._store import TokenStore, missing_tokens_file

__all__ = ["RECHECK_S", "LiveTokens"]

RECHECK_S = 1.0

_log = logging.getLogger("gatehouse.shim.tokens")

_Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class LiveTokens:
    def __init__(
        self,
        path: Path,
        *,
        recheck_s: float = RECHECK_S,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._recheck_s = recheck_s
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._seen = _signature(path)
        # At start a missing or invalid file is fatal (RuntimeError): no tokens, no shim.
        self._store = TokenStore.load(path, clock)
        self._checked = monotonic()

    @classmethod
    def open(cls, path: Path | None) -> LiveTokens:
        if path is None:
            raise RuntimeError(missing_tokens_file(path))
        return cls(path)

    def current(self) -> TokenStore:
        """The store for this request: the file's latest good version."""
        if self._monotonic() - self._checked < self._recheck_s:
            return self._store
        with self._lock:
            now = self._monotonic()
            if now - self._checked >= self._recheck_s:  # not already done by another thread
                self._checked = now
                seen = _signature(self._path)
                if seen != self._seen:
                    self._seen = seen
                    self._reload(seen)
            return self._store

    def _reload(self, seen: _Signature) -> None:
        if seen is None:
            _log.error("the tokens file %s is gone; keeping the last good tokens", self._path)
            return
        try:
            store = TokenStore.load(self._path, self._clock)
        except (RuntimeError, OSError) as exc:
            first = str(exc).splitlines()[0]
            _log.error("keeping the last good tokens: %s", first)
            return
        self._store = store
        _log.info("the tokens file %s changed: %d token(s) loaded", self._path, len(store))
