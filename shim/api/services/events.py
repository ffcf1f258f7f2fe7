"""A run's event stream over server-sent events: ``GET /runs/{run_id}/events``.

Each event is a row of ``run_events`` (``ledger/events.py``), sent with
``id: <seq>``, ``event: <kind>`` and the row as JSON in ``data``. A client that
reconnects with ``Last-Event-ID: N`` (browsers do it by themselves) or
``?after=N`` gets every event numbered above N, once, in order, from whichever
shim it reaches: the stream is read from the database, so it survives a shim
restart and is the same from every shim. When the run has ended and its last
event is sent, the stream closes with a final ``event: end`` (no id). While
nothing happens a comment line keeps the connection alive.

One identity holds at most ``GATEHOUSE_MAX_EVENT_STREAMS`` streams open at once
in one shim (the API's and the dashboard's together); one more is refused with
429 ``rate_limited`` and ``Retry-After`` before anything is streamed, so a
script that opens streams and never closes them runs out of its own, not of the
shim's.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import AsyncIterator, Callable

from sse_starlette import ServerSentEvent
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError, canonical_json
from ledger import events
from shim.api.services import reads
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = [
    "PING_S",
    "event_stream",
    "open_stream",
    "resume_point",
]

# How long a stream with nothing new waits before it reads again (a status change
# announced by PostgreSQL wakes it at once; SQLite has no announcements).
_PG_IDLE_S = 0.25
_SQLITE_IDLE_S = 0.1
# A comment line this often keeps an idle stream's connection open.
PING_S = 15


def resume_point(last_event_id: str | None, after: int | None) -> int:
    """Where a stream starts: after ``Last-Event-ID`` if sent, else after ``?after=``."""
    if last_event_id is None or not last_event_id.strip():
        return after or 0
    raw = last_event_id.strip()
    if not raw.isdigit() or len(raw) > 12:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            "Last-Event-ID must be an event number this stream sent",
            {"last_event_id": raw[:40]},
        )
    return int(raw)


def _read(service: Service, run_id: str, seq: int) -> list[events.Event]:
    with service.db.engine.connect() as conn:
        return events.after(conn, run_id, seq)


def _sse(event: events.Event) -> ServerSentEvent:
    return ServerSentEvent(
        data=canonical_json(event.to_json()), id=str(event.seq), event=event.kind
    )


async def event_stream(service: Service, run_id: str, start: int) -> AsyncIterator[ServerSentEvent]:
    """The run's events after ``start``, then an ``end`` event once it has ended."""
    last, ended, final = start, False, None
    idle = _SQLITE_IDLE_S if service.db.is_sqlite else _PG_IDLE_S
    while True:
        batch = await run_in_threadpool(_read, service, run_id, last)
        for event in batch:
            last = event.seq
            yield _sse(event)
        if batch:
            continue
        if ended:  # everything up to the end is sent
            end = {"run_id": run_id, "status": final, "last": last}
            yield ServerSentEvent(data=json.dumps(end), event="end")
            return
        status = await run_in_threadpool(reads.status, service, run_id)
        if status is None or status.terminal:
            # the terminal phase event committed with the status: one more read has it
            ended, final = True, None if status is None else status.value
            continue
        await service.watch.nudged(run_id, idle)


async def open_stream(
    service: Service, run_id: str, who: Identity, last_event_id: str | None, after: int | None
) -> AsyncIterator[ServerSentEvent]:
    """The run's stream from where the client says (``Last-Event-ID``, else ``?after=``),
    once the run is known to exist and to be the caller's to see, and the caller has a
    stream slot left (``core.StreamSlots``)."""
    start = resume_point(last_event_id, after)
    await run_in_threadpool(reads.run, service, run_id, who)  # exists, and theirs to see
    held = service.streams
    held.take(who.name)
    given_back = _Once(lambda: held.give_back(who.name))
    stream = _slotted(event_stream(service, run_id, start), given_back)
    weakref.finalize(stream, given_back)
    return stream


class _Once:
    """``give_back`` run once, whichever of the stream's end and its finalizer comes first."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            action, self._action = self._action, None
        if action is not None:
            action()


async def _slotted(
    stream: AsyncIterator[ServerSentEvent], given_back: _Once
) -> AsyncIterator[ServerSentEvent]:
    try:
        async for event in stream:
            yield event
    finally:
        given_back()
