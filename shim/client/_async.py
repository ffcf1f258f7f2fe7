"""The asyncio client: the same calls as :class:`~shim.client.Client`, awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TypeVar

import httpx
from httpx_sse import SSEError, aconnect_sse

from contracts import (
    RunEvent,
    RunView,
)
from shim.client._api import Api
from shim.client._calls import Call
from shim.client._errors import ApiError
from shim.client._transport import (
    LOST,
    Connection,
    answer,
    event_of,
    pause,
    request,
    waiting,
)

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient(Api):
    """The Gatehouse API for asyncio; see :class:`~shim.client.Client` for the
    arguments. Use it as an async context manager, or await :meth:`aclose`."""

    def _open(self, how: Connection) -> None:
        self._http = httpx.AsyncClient(**how)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one call (sent again after a ``Retry-After`` within ``retry_for``)."""
        deadline = time.monotonic() + self._retry_for
        while True:
            r = await self._http.send(request(self._http, call))
            after = pause(r, deadline, self._notice)
            if after is None:
                return call.read(answer(r, call))
            await asyncio.sleep(after)

    async def wait(
        self,
        run_id: str,
        statuses: set[str],
        timeout: float,
        on_poll: Callable[[RunView], None] | None = None,
    ) -> RunView:
        steps = waiting(run_id, statuses, timeout, self.look_s, on_poll)
        try:
            step = next(steps)
            while True:
                if isinstance(step, float):  # the shim is away: pause, then ask again
                    await asyncio.sleep(step)
                    step = steps.send(None)
                    continue
                try:
                    got = await self.send(step)
                except LOST as exc:
                    step = steps.throw(exc)
                    continue
                step = steps.send(got)
        except StopIteration as done:
            view: RunView = done.value
            return view

    async def events(
        self, run_id: str, after: int = 0, retries: int = 5
    ) -> AsyncIterator[RunEvent]:
        last, failures = after, 0
        while True:
            headers = {"Last-Event-ID": str(last)} if last else {}
            try:
                async with aconnect_sse(
                    self._http, "GET", f"/runs/{run_id}/events", headers=headers,
                    timeout=httpx.Timeout(self._http.timeout.connect, read=60.0),
                ) as source:  # fmt: skip
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        raise ApiError(source.response.status_code, source.response.json())
                    async for sse in source.aiter_sse():
                        event = event_of(sse.event, sse.data)
                        if event is None:
                            return
                        last, failures = event.seq, 0
                        yield event
            except (httpx.TransportError, SSEError) as exc:
                failures += 1
                if failures > retries:
                    raise ConnectionError(f"the event stream of {run_id} broke: {exc}") from exc
                await asyncio.sleep(min(0.2 * 2**failures, 5.0))
