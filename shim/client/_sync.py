"""The blocking client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TypeVar

import httpx
from httpx_sse import SSEError, connect_sse

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

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """The Gatehouse API, one blocking call per method; answers are parsed into the
    contract models the shim answers with, so a broken answer is noticed here.

    ``ca``: a PEM file to trust an HTTPS shim's certificate by (a CA's, or the
    self-signed certificate itself) in place of the system's CAs. ``retry_for``:
    for how many seconds a 429 or 503 that says ``Retry-After`` (a retryable refusal
    at the door: nothing was done) is sent again after the wait it names; each wait
    is told to ``notice``. Use it as a context manager, or call :meth:`close`."""

    # While a waited-for run's status stands still, how often its steps are looked at.
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
        self._http = httpx.Client(**connection(base_url, token, timeout, ca))

    @classmethod
    def from_env(
        cls, token: str | None = None, *, retry_for: float = 0.0, notice: Notice | None = None
    ) -> Client:
        """A client for the shim this folder's user would reach, found as the CLI finds
        it: ``GATEHOUSE_URL``, else the stack ``gatehouse up`` runs from this folder
        (``var/stack.json``), else ``http://127.0.0.1:8000``; the token ``token`` or
        ``GATEHOUSE_TOKEN``; the CA ``GATEHOUSE_CA``, if set."""
        return cls(**found_shim(token), retry_for=retry_for, notice=notice)

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

    def submit(self, intent: JsonObject, idempotency_key: str | None = None) -> IntentAccepted:
        """POST /intent; the same ``idempotency_key`` and body answer the same run."""
        return self.send(Calls.submit(intent, idempotency_key))

    def submit_archive(
        self,
        content: bytes,
        media_type: str,
        params: dict[str, str],
        idempotency_key: str | None = None,
    ) -> IntentAccepted:
        """Post an OPA archive as an intent; ``params``: name, mode, recipe, … (query)."""
        return self.send(Calls.submit_archive(content, media_type, params, idempotency_key))

    def output_archive(self, run_id: str) -> bytes:
        """The output archive of a run submitted as an OPA archive."""
        return self.send(Calls.output_archive(run_id))

    def run(self, run_id: str) -> RunView:
        return self.send(Calls.run(run_id))

    def runs(
        self, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> RunList:
        """A page of runs, newest first; ``cursor``: the last page's ``next_cursor``."""
        return self.send(Calls.runs(status, limit, cursor))

    def get_json(self, path: str, params: dict[str, str] | None = None) -> JsonValue:
        """A read route's answer as plain JSON (recipes, policies, workers, …)."""
        return self.send(Calls.get_json(path, params))

    def ready(self) -> tuple[bool, JsonValue]:
        """GET /readyz (no token needed): (ready, the report with its reasons)."""
        r = self._http.get("/readyz", headers={"Authorization": ""})
        try:
            report: JsonValue = r.json()
        except ValueError:
            report = r.text
        return r.status_code == 200, report

    def artifact(self, sha256: str) -> bytes:
        return self.send(Calls.artifact(sha256))

    def decide(
        self, run_id: str, approve: bool, digest: str, comment: str | None = None
    ) -> DecisionAccepted:
        """Decide as the token's identity (the shim records who from the token)."""
        return self.send(Calls.decide(run_id, approve, digest, comment))

    def approve(self, run_id: str, digest: str, comment: str | None = None) -> DecisionAccepted:
        """Approve the plan whose digest is ``digest`` (the card's ``plan_digest``):
        a plan changed since it was shown is not approved by it."""
        return self.decide(run_id, True, digest, comment)

    def reject(self, run_id: str, digest: str, comment: str | None = None) -> DecisionAccepted:
        return self.decide(run_id, False, digest, comment)

    def cancel(self, run_id: str, reason: str | None = None) -> CancelAccepted:
        """Cancel as the token's identity (the run's submitter, or an operator)."""
        return self.send(Calls.cancel(run_id, reason))

    def logout(self) -> JsonValue:
        """End the session the token names (one ``gatehouse login`` opened): from now on
        the token is refused."""
        return self.send(Calls.logout())

    def message(self, run_id: str, text: str | None, end: bool = False) -> MessageAccepted:
        """The next turn of an interactive OPA run (or, with ``end``, close its session)."""
        return self.send(Calls.message(run_id, text, end))

    def ledger(self, run_id: str) -> list[CallView]:
        return self.send(Calls.ledger(run_id))

    def verify_ledger(self, run_id: str) -> JsonValue:
        """The shim's check of the run's hash chain and sealed fields."""
        return self.send(Calls.verify_ledger(run_id))

    def replay(self, run_id: str, rules: str = "recorded") -> ReplayReport:
        """Have a worker replay the run from its ledger (waits up to about a minute),
        under the rules it ran under or (``current``) today's."""
        return self.send(Calls.replay(run_id, rules))

    def explain(self, run_id: str) -> ExplainView:
        """The run's explain report (a worker may ask the model: waits up to ~90 s)."""
        return self.send(Calls.explain(run_id))

    def fork(self, run_id: str, from_step: int) -> ForkAccepted:
        return self.send(Calls.fork(run_id, from_step))

    def resolve(self, op_key: str, applied: bool, note: str | None = None) -> CallResolved:
        return self.send(Calls.resolve(op_key, applied, note))

    def episodes(self, run_id: str) -> list[EpisodeView]:
        return self.send(Calls.episodes(run_id))

    def artifacts(self, run_id: str) -> list[ArtifactRef]:
        return self.send(Calls.artifacts(run_id))

    def changed(self, run_id: str, status: str, timeout_s: float) -> RunView:
        """The run once its status is no longer ``status``, or after ``timeout_s``
        (a long poll: the shim answers the moment the status changes)."""
        return self.send(Calls.changed(run_id, status, timeout_s))

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
