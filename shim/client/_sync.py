"""The blocking client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TypeVar

import httpx
from httpx_sse import SSEError, connect_sse

from contracts import (
    JsonValue,
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

__all__ = ["Client"]

T = TypeVar("T")


class Client(Api):
    """The Gatehouse API, one blocking call per method; answers are parsed into the
    contract models the shim answers with, so a broken answer is noticed here.

    ``ca``: a PEM file to trust an HTTPS shim's certificate by (a CA's, or the
    self-signed certificate itself) in place of the system's CAs. ``retry_for``:
    for how many seconds a 429 or 503 that says ``Retry-After`` (a retryable refusal
    at the door: nothing was done) is sent again after the wait it names; each wait
    is told to ``notice``. Use it as a context manager, or call :meth:`close`."""

    def _open(self, how: Connection) -> None:
        self._http = httpx.Client(**how)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """Send one call (sent again after a ``Retry-After`` within ``retry_for``)."""
        deadline = time.monotonic() + self._retry_for
        while True:
            r = self._http.send(request(self._http, call))
            after = pause(r, deadline, self._notice)
            if after is None:
                return call.read(answer(r, call))
            time.sleep(after)

    def ready(self) -> tuple[bool, JsonValue]:
        """GET /readyz (no token needed): (ready, the report with its reasons)."""
        r = self._http.get("/readyz", headers={"Authorization": ""})
        try:
            report: JsonValue = r.json()
        except ValueError:
            report = r.text
        return r.status_code == 200, report

    def wait(
        self,
        run_id: str,
        statuses: set[str],
        timeout: float,
        on_poll: Callable[[RunView], None] | None = None,
    ) -> RunView:
        """The run once its status is one of ``statuses``; ``on_poll`` sees each view on
        the way: at each status change and every ``look_s`` while it stands still.
        RunEndedError at once when the run has ended in another status; a shim that goes
        away meanwhile (a restart) is asked again until it answers. TimeoutError
        (ConnectionError, the shim away) after ``timeout``."""
        steps = waiting(run_id, statuses, timeout, self.look_s, on_poll)
        try:
            step = next(steps)
            while True:
                if isinstance(step, float):  # the shim is away: pause, then ask again
                    time.sleep(step)
                    step = steps.send(None)
                    continue
                try:
                    got = self.send(step)
                except LOST as exc:
                    step = steps.throw(exc)
                    continue
                step = steps.send(got)
        except StopIteration as done:
            view: RunView = done.value
            return view

    def events(self, run_id: str, after: int = 0, retries: int = 5) -> Iterator[RunEvent]:
        """The run's events after ``after`` until the stream ends; a dropped
        connection is opened again from the last event seen (``Last-Event-ID``)."""
        last, failures = after, 0
        while True:
            headers = {"Last-Event-ID": str(last)} if last else {}
            try:
                with connect_sse(
                    self._http, "GET", f"/runs/{run_id}/events", headers=headers,
                    timeout=httpx.Timeout(self._http.timeout.connect, read=60.0),
                ) as source:  # fmt: skip
                    if source.response.status_code >= 400:
                        source.response.read()
                        raise ApiError(source.response.status_code, source.response.json())
                    for sse in source.iter_sse():
                        event = event_of(sse.event, sse.data)
                        if event is None:
                            return
                        last, failures = event.seq, 0
                        yield event
            except (httpx.TransportError, SSEError) as exc:
                failures += 1
                if failures > retries:
                    raise ConnectionError(f"the event stream of {run_id} broke: {exc}") from exc
                time.sleep(min(0.2 * 2**failures, 5.0))
