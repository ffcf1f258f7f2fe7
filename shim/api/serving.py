"""The HTTP/1.1 protocol the shim is served with: uvicorn's h11 one, with a head timeout.

uvicorn closes a connection left idle between requests (``--timeout-keep-alive``)
but sets no deadline on the request head itself: a client that opens a
connection and sends its headers a byte now and then holds it, and a file
descriptor, for as long as it likes (slow-header clients were seen held 60 s and
more). Here a connection's head must be complete within
``GATEHOUSE_HEADER_TIMEOUT_S`` of the connection opening or of its previous
answer ending; else the connection is closed without an answer. Once the head is
in, the body's own deadline applies (``shim.api.http.BODY_READ_TIMEOUT_S``).

``shim.local`` serves the shim with ``--http shim.api.serving:HeadTimeoutH11``
(its ``HTTP_PROTOCOL``); the timeout is read from the environment when uvicorn
imports this module, before any app exists.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from shim.settings import read_header_timeout

__all__ = ["HeadTimeoutH11", "head_timeout_protocol"]


class HeadTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose head takes over
    ``head_timeout_s`` (``GATEHOUSE_HEADER_TIMEOUT_S`` as this module was imported)."""

    head_timeout_s: ClassVar[float] = read_header_timeout(os.environ)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own narrowing
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._head_arrived()  # a whole head parsed: the request is under way

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # the next request's head (a pipelined one may be parsed already)
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._head_arrived()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _head_arrived(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def head_timeout_protocol(seconds: float) -> type[HeadTimeoutH11]:
    """The protocol with a deadline of ``seconds`` (a server started in this process)."""

    class _Timed(HeadTimeoutH11):
        head_timeout_s = seconds

    return _Timed
