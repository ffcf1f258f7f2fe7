"""The door: what every request meets before any route — rate limits and header limits.

An ASGI middleware, so it sees every request, refused ones and unknown routes
included, and an answer it gives costs no routing, no body and no database
read. In order:

1. the client address's token bucket (``GATEHOUSE_RATE_PER_ADDRESS``; the address
   as ``shim.api.edge`` found it: the peer, unless a trusted proxy forwarded the
   request), for a request without a valid bearer token (none, a wrong one, another scheme; or
   any request when identity limits are off);
2. header limits: at most ``MAX_HEADERS`` headers, each (name and value) at
   most ``MAX_HEADER_BYTES``, all together at most ``MAX_HEADERS_TOTAL``
   (431 ``headers_too_large``; uvicorn's own limit, ``shim.settings.H11_MAX_HEAD_BYTES``,
   stops larger heads before they reach the app);
3. the identity's token bucket (``GATEHOUSE_RATE_PER_IDENTITY``), when the
   request carries a valid bearer token: one identity's flood spends its own
   tokens, never those of the others on its address.

Over a limit: 429 ``rate_limited`` with ``Retry-After`` (whole seconds). The
buckets live in this process: with several shims each has its own. ``/healthz``
is exempt from the rate limits (a supervisor's liveness probe must not be
refused), not from the header limits.

Refusals here are recorded like any other (aggregated security events), but a
429 flood does not even cost a database write per request: the repeats of one
(address, identity, route) are counted here and written together at most once
per ``FLUSH_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from contracts import ErrorCode, GatehouseError
from shim.api.http import error_response
from shim.settings import Rate

__all__ = [
    "FLUSH_S",
    "MAX_HEADERS",
    "MAX_HEADERS_TOTAL",
    "MAX_HEADER_BYTES",
    "Door",
    "DoorMiddleware",
    "Record",
    "Refused",
    "TokenBuckets",
]

_log = logging.getLogger("gatehouse.shim")

MAX_HEADERS = 100
MAX_HEADER_BYTES = 8 * 1024
MAX_HEADERS_TOTAL = 16 * 1024
FLUSH_S = 1.0
EXEMPT = frozenset({"/healthz"})
# Past this many buckets, those full again (idle long enough) are forgotten.
_PRUNE_AT = 10_000


class TokenBuckets:
    """One token bucket per key: ``take`` spends a token, or says how long until one."""

    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str) -> float:
        """0 when a token was spent; else the seconds until one is there."""
        now = self._clock()
        tokens, at = self._buckets.get(key, (float(self.rate.burst), now))
        tokens = min(float(self.rate.burst), tokens + (now - at) * self.rate.per_s)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > _PRUNE_AT:
                self._prune(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate.per_s

    def _prune(self, now: float) -> None:
        full = self.rate.burst / self.rate.per_s  # seconds an empty bucket takes to fill
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full}


@dataclass(frozen=True)
class Refused:
    """Who was refused what, where: the parts of a refusal's record."""

    exc: GatehouseError
    who: str | None
    route: str  # method and path, as asked
    template: str  # method and route template: what repeats are grouped by
    run_id: str | None
    address: str
    token_id: str | None = None  # the caller's token, when one matched


Record = Callable[[Refused, int], Awaitable[None]]


@dataclass
class _Held:
    refused: Refused
    count: int = 0
    written_at: float = field(default=-math.inf)


class Door:
    """The door's state, shared by the middleware and the app's lifespan (which flushes
    the held 429 counts every ``FLUSH_S`` and once more when the shim stops)."""

    def __init__(
        self,
        per_address: Rate | None,
        per_identity: Rate | None,
        identify: Callable[[str | None], str | None],
        record: Record,
    ) -> None:
        self.per_address = TokenBuckets(per_address) if per_address else None
        self.per_identity = TokenBuckets(per_identity) if per_identity else None
        self.identify = identify
        self.record = record
        self._held: dict[tuple[str, str], _Held] = {}

    async def rate_limited(self, refused: Refused) -> None:
        """Record a 429: at once when its kind was not written within ``FLUSH_S``, else
        counted here and written by the next ``flush``."""
        key = (refused.address, f"{refused.who} {refused.template}")
        held = self._held.setdefault(key, _Held(refused))
        held.count += 1
        now = time.monotonic()
        if now - held.written_at >= FLUSH_S:
            count, held.count, held.written_at = held.count, 0, now
            await self.record(refused, count)

    async def flush(self) -> None:
        """Write every held count; forget kinds not seen for a while."""
        now = time.monotonic()
        for key, held in list(self._held.items()):
            if held.count:
                count, held.count, held.written_at = held.count, 0, now
                await self.record(held.refused, count)
            elif now - held.written_at > 10 * FLUSH_S:
                del self._held[key]

    async def run(self, stopping: asyncio.Event) -> None:
        """Flush every ``FLUSH_S``, and once more when ``stopping`` is set, then return.
        Never cancelled mid-write: a write cut off by a cancel goes on in its thread, and
        the shim would stop before its count reached the database."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), FLUSH_S)
            last = stopping.is_set()  # set before this flush began: nothing comes after it
            try:
                await self.flush()
            except Exception as exc:  # noqa: BLE001  (the flusher must outlive any one write)
                _log.warning("could not write rate-limited refusals: %s", type(exc).__name__)
            if last:
                return


def _headers_problem(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    if len(headers) > MAX_HEADERS:
        return f"{len(headers)} headers; at most {MAX_HEADERS}"
    total = 0
    for name, value in headers:
        size = len(name) + len(value)
        if size > MAX_HEADER_BYTES:
            shown = name.decode("latin-1")[:64]
            return f"header {shown} is {size} bytes; at most {MAX_HEADER_BYTES}"
        total += size
    if total > MAX_HEADERS_TOTAL:
        return f"the headers are {total} bytes together; at most {MAX_HEADERS_TOTAL}"
    return None


def _route(routes: Sequence[BaseRoute], scope: Scope) -> tuple[str, str | None]:
    """(the route's template, its run id) for grouping; ``-`` for no route."""
    partial: tuple[str, str | None] | None = None
    for route in routes:
        match, child = route.matches(scope)
        found = (str(getattr(route, "path", "-")), child.get("path_params", {}).get("run_id"))
        if match is Match.FULL:
            return found
        if match is Match.PARTIAL and partial is None:
            partial = found
    return partial or ("-", None)


class DoorMiddleware:
    """The ASGI side of ``Door``: see the module's docstring."""

    def __init__(self, app: ASGIApp, door: Door, routes: Callable[[], Sequence[BaseRoute]]):
        self.app = app
        self.door = door
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = await self._check(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await refusal(scope, receive, send)

    def _refused(self, scope: Scope, exc: GatehouseError, who: str | None) -> Refused:
        method = str(scope.get("method", "-"))
        template, run_id = _route(self.routes(), scope)
        client = scope.get("client")
        return Refused(
            exc=exc,
            who=who,
            route=f"{method} {scope.get('path', '')}",
            template=f"{method} {template}",
            run_id=run_id,
            address=str(client[0]) if client else "-",
        )

    async def _check(self, scope: Scope) -> ASGIApp | None:
        door = self.door
        client = scope.get("client")
        address = str(client[0]) if client else "-"
        exempt = scope.get("path") in EXEMPT
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        # A caller with a valid token spends its identity's tokens, not its address's:
        # every local user is 127.0.0.1, and one script's flood must not shut the
        # others out. The address bucket guards requests with no valid token.
        who = None
        if door.per_identity and not exempt:
            authorization = next(
                (v.decode("latin-1") for k, v in headers if k.lower() == b"authorization"), None
            )
            who = door.identify(authorization)
        if door.per_address and not exempt and who is None:
            wait = door.per_address.take(address)
            if wait:
                return await self._too_many(scope, None, "this address", wait)
        problem = _headers_problem(headers)
        if problem is not None:
            exc = GatehouseError(ErrorCode.HEADERS_TOO_LARGE, problem)
            await door.record(self._refused(scope, exc, None), 1)
            return error_response(exc)
        if door.per_identity and who is not None:
            wait = door.per_identity.take(who)
            if wait:
                return await self._too_many(scope, who, who, wait)
        return None

    async def _too_many(self, scope: Scope, who: str | None, whom: str, wait: float) -> ASGIApp:
        after = max(1, math.ceil(wait))
        exc = GatehouseError(
            ErrorCode.RATE_LIMITED,
            f"too many requests from {whom}; try again in {after} s",
            {"retry_after_s": after},
        )
        await self.door.rate_limited(self._refused(scope, exc, who))
        return error_response(exc)  # Retry-After from details["retry_after_s"]
