"""What the sync and the async client share about sending: the connection's settings,
when a refusal is sent again, what counts as an answer, and the wait's long polls
(written once, as a generator of calls that either client drives)."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Generator
from typing import TypedDict, TypeVar

import httpx

from contracts import JsonValue, RunEvent, RunView
from shim.client._calls import Call, Calls
from shim.client._errors import ApiError, RunEndedError, retry_after

__all__ = [
    "KEEPALIVE",
    "LOST",
    "Connection",
    "Notice",
    "Waiting",
    "answer",
    "connection",
    "event_of",
    "pause",
    "request",
    "waiting",
]

# A kept-alive connection is dropped by the client before the shim drops it (uvicorn
# closes one idle for 5 s): with both at 5 s, a request sent just as the shim closes
# its end is met with a connection reset.
KEEPALIVE = httpx.Limits(keepalive_expiry=2.0)

T = TypeVar("T")
Notice = Callable[[str], None]
# Yields the calls to send (sent each one's answer, or thrown what failed it) and the
# seconds to sleep before trying again (sent None); returns the run it waited for.
Waiting = Generator[Call[RunView] | float, RunView | None, RunView]
# What a call a wait sends may fail with that is the shim going away for a while (a
# restart, an upgrade) rather than an answer: the driver throws it into ``waiting``.
LOST = (httpx.TransportError, ApiError)


class Connection(TypedDict):
    """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``."""

    base_url: str
    timeout: float
    limits: httpx.Limits
    trust_env: bool
    headers: dict[str, str]
    verify: ssl.SSLContext | bool


def connection(base_url: str, token: str | None, timeout: float, ca: str | None) -> Connection:
    """How both clients connect: no proxy from the environment, keep-alive shorter
    than the shim's, the token on every request, ``ca`` trusted when given."""
    return {
        "base_url": base_url.rstrip("/"),
        "timeout": timeout,
        "limits": KEEPALIVE,
        "trust_env": False,
        "headers": {"Authorization": f"Bearer {token}"} if token else {},
        "verify": ssl.create_default_context(cafile=ca) if ca else True,
    }


def request(http: httpx.Client | httpx.AsyncClient, call: Call[T]) -> httpx.Request:
    """The HTTP request of ``call`` on either client (its own timeout, or the client's)."""
    return http.build_request(
        call.method,
        call.path,
        json=call.body,
        content=call.content,
        params=call.params,
        headers=call.headers,
        timeout=call.timeout if call.timeout is not None else http.timeout,
    )


def _body(r: httpx.Response) -> JsonValue:
    try:
        data: JsonValue = r.json()
    except ValueError:
        data = r.text
    return data


def pause(r: httpx.Response, deadline: float, notice: Notice | None) -> float | None:
    """How long to wait before sending a refused request again: the ``Retry-After`` of
    a 429 or 503 that still fits before ``deadline``; None to take the answer as it is."""
    after = retry_after(r.status_code, r.headers.get("retry-after"))
    if after is None or time.monotonic() + after > deadline:
        return None
    if notice is not None:
        code = ApiError(r.status_code, _body(r)).code
        notice(f"the shim answered {r.status_code} {code}: again in {after:g} s")
    return after


def answer(r: httpx.Response, call: Call[T]) -> bytes:
    """The answer's body; ApiError for a refusal or a redirect (the API never
    redirects: a path that did not name what it meant)."""
    if r.is_redirect:
        where = r.headers.get("location", "elsewhere")
        message = f"the shim answered {call.method} {call.path} with a redirect to {where}"
        raise ApiError(
            r.status_code, {"error": {"code": "unexpected_redirect", "message": message}}
        )
    if r.status_code >= 400:
        after = retry_after(r.status_code, r.headers.get("retry-after"))
        raise ApiError(r.status_code, _body(r), after)
    return r.content


def event_of(kind: str, data: str) -> RunEvent | None:
    """A server-sent event as a run event; None for the stream's ``end``."""
    if kind == "end":
        return None
    return RunEvent.model_validate(json.loads(data))


def _shim_away(exc: BaseException) -> bool:
    """Whether a failed call is the shim (or its database) away for a while: no
    connection, a connection cut off, or 502/503/504 from it or a proxy in front."""
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, ApiError) and exc.status in (502, 503, 504)


def waiting(
    run_id: str,
    statuses: set[str],
    timeout: float,
    look_s: float,
    on_poll: Callable[[RunView], None] | None,
) -> Waiting:
    """The run once its status is one of ``statuses``; ``on_poll`` sees each view on
    the way: at each status change (a long poll wakes on it) and every ``look_s``
    while it stands still, so finished steps show. A run that has ended in another
    status raises RunEndedError at once. A shim that goes away meanwhile (restarted, its
    database down) is asked again with a growing pause (0.25 s up to 5 s) until it
    answers; the wait's time bounds that too. TimeoutError after ``timeout``, while
    the run stands still; ConnectionError after it, while the shim is away."""
    deadline = time.monotonic() + timeout
    away = 0  # failed tries in a row

    def ask(call: Call[RunView]) -> Generator[Call[RunView] | float, RunView | None, RunView]:
        nonlocal away
        while True:
            try:
                got = yield call
            except LOST as exc:
                left = deadline - time.monotonic()
                if not _shim_away(exc):
                    raise
                if left <= 0:
                    raise ConnectionError(
                        f"the shim did not answer about run {run_id} for the {timeout:.0f} s"
                        f" of the wait ({exc}); the run goes on without it"
                    ) from exc
                yield min(0.25 * 2**away, 5.0, left)
                away += 1
                continue
            assert got is not None  # sent a call's answer: the driver sends None only after a pause
            away = 0
            return got

    view = yield from ask(Calls.run(run_id))
    while True:
        if on_poll is not None:
            on_poll(view)
        if view.status.value in statuses:
            return view
        if view.status.terminal:
            raise RunEndedError(view, statuses)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"run {run_id} is still {view.status.value} after {timeout:.0f} s")
        view = yield from ask(Calls.changed(run_id, view.status.value, min(look_s, left)))
