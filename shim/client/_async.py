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
    CallResolved,
    CallView,
    CancelAccepted,
    DecisionAccepted,
    EpisodeView,
    ExplainView,
    ForkAccepted,
    IntentAccepted,
    JsonObject,
    JsonValue,
    MessageAccepted,
    ReplayReport,
    RunEvent,
    RunList,
    RunView,
)
from shim.client._calls import ArtifactRef, Call, Calls
from shim.client._errors import ApiError
from shim.client._local import found_shim
from shim.client._transport import (
    LOST,
    Notice,
    answer,
    connection,
    event_of,
    pause,
    request,
    waiting,
)

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """The Gatehouse API for asyncio; see :class:`~shim.client.Client` for the
    arguments. Use it as an async context manager, or await :meth:`aclose`."""

    look_s = 2.0

    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout: float = 30,
        ca: str | None = None,
        *,
        retry_for: float = 0.0,
        notice: Notice | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._retry_for = retry_for
        self._notice = notice
        self._http = httpx.AsyncClient(**connection(base_url, token, timeout, ca))

    @classmethod
    def from_env(
        cls, token: str | None = None, *, retry_for: float = 0.0, notice: Notice | None = None
    ) -> AsyncClient:
        """A client for the shim this folder's user would reach, found as the CLI finds
        it: ``GATEHOUSE_URL``, else the stack ``gatehouse up`` runs from this folder
        (``var/stack.json``), else ``http://127.0.0.1:8000``; the token ``token`` or
        ``GATEHOUSE_TOKEN``; the CA ``GATEHOUSE_CA``, if set."""
        return cls(**found_shim(token), retry_for=retry_for, notice=notice)

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

    async def submit(
        self, intent: JsonObject, idempotency_key: str | None = None
    ) -> IntentAccepted:
        return await self.send(Calls.submit(intent, idempotency_key))

    async def submit_archive(
        self,
        content: bytes,
        media_type: str,
        params: dict[str, str],
        idempotency_key: str | None = None,
    ) -> IntentAccepted:
        return await self.send(Calls.submit_archive(content, media_type, params, idempotency_key))

    async def output_archive(self, run_id: str) -> bytes:
        return await self.send(Calls.output_archive(run_id))

    async def run(self, run_id: str) -> RunView:
        return await self.send(Calls.run(run_id))

    async def runs(
        self, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> RunList:
        return await self.send(Calls.runs(status, limit, cursor))

    async def get_json(self, path: str, params: dict[str, str] | None = None) -> JsonValue:
        return await self.send(Calls.get_json(path, params))

    async def artifact(self, sha256: str) -> bytes:
        return await self.send(Calls.artifact(sha256))

    async def decide(
        self, run_id: str, approve: bool, digest: str, comment: str | None = None
    ) -> DecisionAccepted:
        return await self.send(Calls.decide(run_id, approve, digest, comment))

    async def approve(
        self, run_id: str, digest: str, comment: str | None = None
    ) -> DecisionAccepted:
        return await self.decide(run_id, True, digest, comment)

    async def reject(
        self, run_id: str, digest: str, comment: str | None = None
    ) -> DecisionAccepted:
        return await self.decide(run_id, False, digest, comment)

    async def cancel(self, run_id: str, reason: str | None = None) -> CancelAccepted:
        return await self.send(Calls.cancel(run_id, reason))

    async def logout(self) -> JsonValue:
        return await self.send(Calls.logout())

    async def message(self, run_id: str, text: str | None, end: bool = False) -> MessageAccepted:
        return await self.send(Calls.message(run_id, text, end))

    async def ledger(self, run_id: str) -> list[CallView]:
        return await self.send(Calls.ledger(run_id))

    async def verify_ledger(self, run_id: str) -> JsonValue:
        return await self.send(Calls.verify_ledger(run_id))

    async def replay(self, run_id: str, rules: str = "recorded") -> ReplayReport:
        return await self.send(Calls.replay(run_id, rules))

    async def explain(self, run_id: str) -> ExplainView:
        return await self.send(Calls.explain(run_id))

    async def fork(self, run_id: str, from_step: int) -> ForkAccepted:
        return await self.send(Calls.fork(run_id, from_step))

    async def resolve(self, op_key: str, applied: bool, note: str | None = None) -> CallResolved:
        return await self.send(Calls.resolve(op_key, applied, note))

    async def episodes(self, run_id: str) -> list[EpisodeView]:
        return await self.send(Calls.episodes(run_id))

    async def artifacts(self, run_id: str) -> list[ArtifactRef]:
        return await self.send(Calls.artifacts(run_id))

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
