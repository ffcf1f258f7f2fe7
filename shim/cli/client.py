"""A small HTTP client for the Gatehouse API, used by the CLI and the demo.

Answers are parsed into the same contract models the shim answers with, so
a client notices a response that breaks its contract instead of passing it on.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator

import httpx
from httpx_sse import SSEError, connect_sse
from pydantic import BaseModel

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
    RunStatus,
    RunView,
    TextChannel,
)

__all__ = ["KEEPALIVE", "ApiError", "ArtifactRef", "Client", "dump", "explain_text"]

ArtifactRef = dict[str, str | int]


# A kept-alive connection is dropped by the client before the shim drops it (uvicorn
# closes one idle for 5 s): with both at 5 s, a request sent just as the shim closes
# its end is met with a connection reset.
KEEPALIVE = httpx.Limits(keepalive_expiry=2.0)


class _Calls(BaseModel):
    calls: list[CallView]


class _Episodes(BaseModel):
    episodes: list[EpisodeView]
    text_channels: dict[str, TextChannel]


class _Artifacts(BaseModel):
    artifacts: list[ArtifactRef]


class ApiError(Exception):
    def __init__(self, status: int, body: JsonValue) -> None:
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else {}
        self.status = status
        self.code = str(err.get("code", "unknown"))
        self.message = str(err.get("message", body))
        # What the shim says to act on: known recipes, the failing path, allowed values.
        self.details: JsonValue = err.get("details")
        super().__init__(f"HTTP {status} {self.code}: {self.message}")


def _body(r: httpx.Response) -> JsonValue:
    try:
        data: JsonValue = r.json()
    except ValueError:
        data = r.text
    return data


def _retry_after(r: httpx.Response) -> float | None:
    """The seconds a retryable refusal asks the client to wait, or None."""
    if r.status_code not in (429, 503):
        return None
    try:
        after = float(r.headers.get("retry-after", ""))
    except ValueError:
        return None
    return after if 0 <= after <= 300 else None


class Client:
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
        notice: Callable[[str], None] | None = None,
    ) -> None:
        """``ca``: a PEM file to trust an HTTPS shim's certificate by (a CA's, or the
        self-signed certificate itself) in place of the system's CAs. ``retry_for``:
        for how many seconds a 429 or 503 that says ``Retry-After`` (a retryable refusal
        at the door: nothing was done) is sent again after the wait it names; each
        wait is told to ``notice``."""
        self.base_url = base_url.rstrip("/")
        self._retry_for = retry_for
        self._notice = notice
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            limits=KEEPALIVE,
            trust_env=False,
            headers=headers,
            verify=ssl.create_default_context(cafile=ca) if ca else True,
        )

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        *,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> bytes:
        deadline = time.monotonic() + self._retry_for
        while True:
            r = self._http.request(
                method,
                path,
                json=body,
                content=content,
                params=params,
                headers=headers,
                timeout=timeout if timeout is not None else self._http.timeout,
            )
            after = _retry_after(r)
            if after is None or time.monotonic() + after > deadline:
                break
            if self._notice is not None:
                code = ApiError(r.status_code, _body(r)).code
                self._notice(f"the shim answered {r.status_code} {code}: again in {after:g} s")
            time.sleep(after)
        if r.is_redirect:  # the API never redirects: a path that did not name what it meant
            where = r.headers.get("location", "elsewhere")
            message = f"the shim answered {method} {path} with a redirect to {where}"
            raise ApiError(
                r.status_code, {"error": {"code": "unexpected_redirect", "message": message}}
            )
        if r.status_code >= 400:
            raise ApiError(r.status_code, _body(r))
        return r.content

    def submit(self, intent: JsonObject, idempotency_key: str | None = None) -> IntentAccepted:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return IntentAccepted.model_validate_json(self._call("POST", "/intent", intent, headers))

    def submit_archive(
        self,
        content: bytes,
        media_type: str,
        params: dict[str, str],
        idempotency_key: str | None = None,
    ) -> IntentAccepted:
        """Post an OPA archive as an intent; ``params``: name, mode, recipe, … (query)."""
        headers = {"Content-Type": media_type}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        raw = self._call("POST", "/intent", None, headers, content=content, params=params)
        return IntentAccepted.model_validate_json(raw)

    def output_archive(self, run_id: str) -> bytes:
        """The output archive of a run submitted as an OPA archive."""
        return self._call("GET", f"/runs/{run_id}/output.opa")

    def run(self, run_id: str) -> RunView:
        return RunView.model_validate_json(self._call("GET", f"/runs/{run_id}"))

    def runs(
        self, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> RunList:
        """A page of runs, newest first; ``cursor``: the last page's ``next_cursor``."""
        params = {
            "status": status,
            "limit": None if limit is None else str(limit),
            "cursor": cursor,
        }
        given = {k: v for k, v in params.items() if v is not None}
        return RunList.model_validate_json(self._call("GET", "/runs", params=given))

    def get_json(self, path: str, params: dict[str, str] | None = None) -> JsonValue:
        """A read route's answer as plain JSON (recipes, policies, workers, …)."""
        out: JsonValue = json.loads(self._call("GET", path, params=params))
        return out

    def ready(self) -> tuple[bool, JsonValue]:
        """GET /readyz (no token needed): (ready, the report with its reasons)."""
        r = self._http.get("/readyz", headers={"Authorization": ""})
        try:
            report: JsonValue = r.json()
        except ValueError:
            report = r.text
        return r.status_code == 200, report

    def artifact(self, sha256: str) -> bytes:
        return self._call("GET", f"/artifacts/{sha256}")

    def decide(
        self, run_id: str, approve: bool, digest: str, comment: str | None = None
    ) -> DecisionAccepted:
        """Decide as the token's identity (the shim records who from the token)."""
        body: JsonObject = {"plan_digest": digest}
        if comment:
            body["comment"] = comment
        route = "approve" if approve else "reject"
        return DecisionAccepted.model_validate_json(self._call("POST", f"/{route}/{run_id}", body))

    def cancel(self, run_id: str, reason: str | None = None) -> CancelAccepted:
        """Cancel as the token's identity (the run's submitter, or an operator)."""
        body: JsonObject = {"reason": reason} if reason else {}
        return CancelAccepted.model_validate_json(
            self._call("POST", f"/runs/{run_id}/cancel", body)
        )

    def message(self, run_id: str, text: str | None, end: bool = False) -> MessageAccepted:
        """The next turn of an interactive OPA run (or, with ``end``, close its session)."""
        body: JsonObject = {"end": True} if end else {"text": text}
        return MessageAccepted.model_validate_json(
            self._call("POST", f"/runs/{run_id}/messages", body)
        )

    def ledger(self, run_id: str) -> list[CallView]:
        return _Calls.model_validate_json(self._call("GET", f"/runs/{run_id}/ledger")).calls

    def verify_ledger(self, run_id: str) -> JsonValue:
        out: JsonValue = json.loads(self._call("GET", f"/runs/{run_id}/ledger/verify"))
        return out

    def replay(self, run_id: str, rules: str = "recorded") -> ReplayReport:
        """Have a worker replay the run from its ledger (waits up to about a minute),
        under the rules it ran under or (``current``) today's."""
        params = {"rules": rules} if rules != "recorded" else None
        raw = self._call("POST", f"/runs/{run_id}/replay", timeout=90, params=params)
        return ReplayReport.model_validate_json(raw)

    def explain(self, run_id: str) -> ExplainView:
        """The run's explain report (a worker may ask the model: waits up to ~90 s)."""
        raw = self._call("GET", f"/runs/{run_id}/explain", timeout=120)
        return ExplainView.model_validate_json(raw)

    def fork(self, run_id: str, from_step: int) -> ForkAccepted:
        raw = self._call("POST", f"/runs/{run_id}/fork", {"from_step": from_step})
        return ForkAccepted.model_validate_json(raw)

    def resolve(self, op_key: str, applied: bool, note: str | None = None) -> CallResolved:
        body: JsonObject = {"outcome": "applied" if applied else "not_applied"}
        if note:
            body["note"] = note
        return CallResolved.model_validate_json(
            self._call("POST", f"/calls/{op_key}/resolve", body)
        )

    def episodes(self, run_id: str) -> list[EpisodeView]:
        raw = self._call("GET", f"/runs/{run_id}/episodes")
        return _Episodes.model_validate_json(raw).episodes

    def artifacts(self, run_id: str) -> list[ArtifactRef]:
        raw = self._call("GET", f"/runs/{run_id}/artifacts")
        return _Artifacts.model_validate_json(raw).artifacts

    def changed(self, run_id: str, status: str, timeout_s: float) -> RunView:
        """The run once its status is no longer ``status``, or after ``timeout_s``
        (a long poll: the shim answers the moment the status changes)."""
        others = ",".join(s.value for s in RunStatus if s.value != status)
        params = {"until": others, "timeout_s": f"{max(0.1, min(timeout_s, 60.0)):.1f}"}
        raw = self._call("GET", f"/runs/{run_id}/wait", params=params, timeout=timeout_s + 30)
        return RunView.model_validate_json(raw)

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
                        data = json.loads(sse.data)
                        if sse.event == "end":
                            return
                        event = RunEvent.model_validate(data)
                        last, failures = event.seq, 0
                        yield event
            except (httpx.TransportError, SSEError) as exc:
                failures += 1
                if failures > retries:
                    raise ConnectionError(f"the event stream of {run_id} broke: {exc}") from exc
                time.sleep(min(0.2 * 2**failures, 5.0))

    def wait(
        self,
        run_id: str,
        statuses: set[str],
        timeout: float,
        on_poll: Callable[[RunView], None] | None = None,
    ) -> RunView:
        """The run once its status is one of ``statuses``; ``on_poll`` sees each view on
        the way: at each status change (a long poll wakes on it) and every ``look_s``
        while it stands still, so finished steps show. TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        view = self.run(run_id)
        while True:
            if on_poll is not None:
                on_poll(view)
            if view.status.value in statuses:
                return view
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"run {run_id} is still {view.status.value} after {timeout:.0f} s"
                )
            view = self.changed(run_id, view.status.value, min(self.look_s, left))


def dump(value: BaseModel | list[CallView] | list[EpisodeView]) -> JsonValue:
    """JSON for printing: a model or a list of models."""
    if isinstance(value, list):
        return [v.model_dump(mode="json") for v in value]
    out: JsonValue = value.model_dump(mode="json")
    return out


def explain_text(view: ExplainView) -> str:
    """An explain report for a terminal: headline, summary, step notes, concerns, source."""
    report = view.report
    lines = [report.headline, "", report.summary]
    if report.steps:
        lines += ["", "Steps:"] + [f"  {n.step_id}: {n.note}" for n in report.steps]
    if report.concerns:
        lines += ["", "Concerns:"] + [f"  - {c}" for c in report.concerns]
    source = "recorded earlier, served from the ledger" if view.from_ledger else "new"
    lines += [
        "",
        f"(model {view.model}; ledger entry {view.op_key[:12]}, attempt {view.attempt}; {source})",
    ]
    return "\n".join(lines)
