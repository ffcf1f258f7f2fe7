"""The OpenCode event stream (``GET /event``), read on a background thread.

A turn opens its own feed before it sends the prompt, so nothing the turn
causes is missed; ``start`` returns once the server said ``server.connected``.
Events come out of ``get`` in arrival order, parsed.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from contracts import ErrorCode, GatehouseError, JsonObject, kept_loads
from worker.handlers.opencode.client import OpencodeClient

__all__ = ["EventFeed"]

_CONNECT_TIMEOUT_S = 10.0


class EventFeed:
    def __init__(self, url: str, password: str, directory: Path) -> None:
        # Its own client: closing it from the turn's thread ends the blocked read.
        self._client = OpencodeClient(url, password, directory)
        self._events: queue.Queue[JsonObject] = queue.Queue()
        self._connected = threading.Event()
        self._closed = threading.Event()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._read, name="opencode-events", daemon=True)

    def start(self) -> EventFeed:
        self._thread.start()
        if not self._connected.wait(_CONNECT_TIMEOUT_S):
            self.close()
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE,
                f"the OpenCode event stream did not connect: {self.error or 'no answer'}",
            )
        return self

    def get(self, timeout_s: float) -> JsonObject | None:
        try:
            return self._events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    @property
    def ended(self) -> bool:
        """The stream ended (the server went away or the feed was closed)."""
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        self._client.close()

    def _read(self) -> None:
        try:
            with self._client.event_lines() as lines:
                for line in lines:
                    if self._closed.is_set():
                        return
                    if not line.startswith("data:"):
                        continue
                    try:
                        event = kept_loads(line[5:].strip())
                    except (ValueError, RecursionError):
                        continue
                    if not isinstance(event, dict):
                        continue
                    if event.get("type") == "server.connected":
                        self._connected.set()
                    self._events.put(event)
        except GatehouseError as exc:
            self.error = exc.message
        except RuntimeError as exc:  # the client was closed under the read: we are done
            self.error = str(exc)[:200]
        finally:
            self._closed.set()
