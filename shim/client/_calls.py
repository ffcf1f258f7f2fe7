"""Each API call as data (method, path, body, how to read the answer): the clients' methods
(``shim.client._api``), so that the sync and the async client differ only in how they send."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

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
    RunList,
    RunStatus,
    RunView,
    TextChannel,
)

__all__ = ["ArtifactRef", "Call", "Calls"]

T = TypeVar("T")
ArtifactRef = dict[str, str | int]


class _Ledger(BaseModel):
    calls: list[CallView]


class _Episodes(BaseModel):
    episodes: list[EpisodeView]
    text_channels: dict[str, TextChannel]


class _Artifacts(BaseModel):
    artifacts: list[ArtifactRef]


def _raw(content: bytes) -> bytes:
    return content


def _json(content: bytes) -> JsonValue:
    out: JsonValue = json.loads(content)
    return out


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its successful answer is read."""

    method: str
    path: str
    read: Callable[[bytes], T]
    body: JsonObject | None = None
    headers: dict[str, str] | None = None
    params: dict[str, str] | None = None
    content: bytes | None = None
    timeout: float | None = None


class Calls:
    """The API's calls; every method is pure (it sends nothing)."""

    @staticmethod
    def submit(intent: JsonObject, idempotency_key: str | None = None) -> Call[IntentAccepted]:
        """POST /intent; the same ``idempotency_key`` and body answer the same run."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return Call("POST", "/intent", IntentAccepted.model_validate_json, intent, headers)

    @staticmethod
    def submit_archive(
        content: bytes,
        media_type: str,
        params: dict[str, str],
        idempotency_key: str | None = None,
    ) -> Call[IntentAccepted]:
        """Post an OPA archive as an intent; ``params``: name, mode, recipe, … (query)."""
        headers = {"Content-Type": media_type}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        return Call(
            "POST", "/intent", IntentAccepted.model_validate_json, None, headers, params, content
        )

    @staticmethod
    def output_archive(run_id: str) -> Call[bytes]:
        """The output archive of a run submitted as an OPA archive."""
        return Call("GET", f"/runs/{run_id}/output.opa", _raw)

    @staticmethod
    def run(run_id: str) -> Call[RunView]:
        return Call("GET", f"/runs/{run_id}", RunView.model_validate_json)

    @staticmethod
    def runs(
        status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Call[RunList]:
        """A page of runs, newest first; ``cursor``: the last page's ``next_cursor``."""
        limits = None if limit is None else str(limit)
        params = {"status": status, "limit": limits, "cursor": cursor}
        given = {k: v for k, v in params.items() if v is not None}
        return Call("GET", "/runs", RunList.model_validate_json, params=given)

    @staticmethod
    def get_json(path: str, params: dict[str, str] | None = None) -> Call[JsonValue]:
        """A read route's answer as plain JSON (recipes, policies, workers, …)."""
        return Call("GET", path, _json, params=params)

    @staticmethod
    def artifact(sha256: str) -> Call[bytes]:
        return Call("GET", f"/artifacts/{sha256}", _raw)

    @staticmethod
    def decide(
        run_id: str, approve: bool, digest: str, comment: str | None = None
    ) -> Call[DecisionAccepted]:
        """Decide as the token's identity (the shim records who from the token)."""
        body: JsonObject = {"plan_digest": digest}
        if comment:
            body["comment"] = comment
        route = "approve" if approve else "reject"
        return Call("POST", f"/{route}/{run_id}", DecisionAccepted.model_validate_json, body)

    @staticmethod
    def approve(run_id: str, digest: str, comment: str | None = None) -> Call[DecisionAccepted]:
        """Approve the plan whose digest is ``digest`` (the card's ``plan_digest``):
        a plan changed since it was shown is not approved by it."""
        return Calls.decide(run_id, True, digest, comment)

    @staticmethod
    def reject(run_id: str, digest: str, comment: str | None = None) -> Call[DecisionAccepted]:
        return Calls.decide(run_id, False, digest, comment)

    @staticmethod
    def cancel(run_id: str, reason: str | None = None) -> Call[CancelAccepted]:
        """Cancel as the token's identity (the run's submitter, or an operator)."""
        body: JsonObject = {"reason": reason} if reason else {}
        return Call("POST", f"/runs/{run_id}/cancel", CancelAccepted.model_validate_json, body)

    @staticmethod
    def logout() -> Call[JsonValue]:
        """End the session the token names (one ``gatehouse login`` opened): from now on
        the token is refused."""
        return Call("POST", "/auth/oidc/logout", _json, {})

    @staticmethod
    def message(run_id: str, text: str | None, end: bool = False) -> Call[MessageAccepted]:
        """The next turn of an interactive OPA run (or, with ``end``, close its session)."""
        body: JsonObject = {"end": True} if end else {"text": text}
        return Call("POST", f"/runs/{run_id}/messages", MessageAccepted.model_validate_json, body)

    @staticmethod
    def ledger(run_id: str) -> Call[list[CallView]]:
        def read(content: bytes) -> list[CallView]:
            return _Ledger.model_validate_json(content).calls

        return Call("GET", f"/runs/{run_id}/ledger", read)

    @staticmethod
    def verify_ledger(run_id: str) -> Call[JsonValue]:
        """The shim's check of the run's hash chain and sealed fields."""
        return Call("GET", f"/runs/{run_id}/ledger/verify", _json)

    @staticmethod
    def replay(run_id: str, rules: str = "recorded") -> Call[ReplayReport]:
        """Have a worker replay the run from its ledger (waits up to about a minute),
        under the rules it ran under or (``current``) today's."""
        params = {"rules": rules} if rules != "recorded" else None
        return Call(
            "POST", f"/runs/{run_id}/replay", ReplayReport.model_validate_json,
            params=params, timeout=90,
        )  # fmt: skip

    @staticmethod
    def explain(run_id: str) -> Call[ExplainView]:
        """The run's explain report (a worker may ask the model: waits up to ~90 s)."""
        return Call("GET", f"/runs/{run_id}/explain", ExplainView.model_validate_json, timeout=120)

    @staticmethod
    def fork(run_id: str, from_step: int) -> Call[ForkAccepted]:
        body: JsonObject = {"from_step": from_step}
        return Call("POST", f"/runs/{run_id}/fork", ForkAccepted.model_validate_json, body)

    @staticmethod
    def resolve(op_key: str, applied: bool, note: str | None = None) -> Call[CallResolved]:
        body: JsonObject = {"outcome": "applied" if applied else "not_applied"}
        if note:
            body["note"] = note
        return Call("POST", f"/calls/{op_key}/resolve", CallResolved.model_validate_json, body)

    @staticmethod
    def episodes(run_id: str) -> Call[list[EpisodeView]]:
        def read(content: bytes) -> list[EpisodeView]:
            return _Episodes.model_validate_json(content).episodes

        return Call("GET", f"/runs/{run_id}/episodes", read)

    @staticmethod
    def artifacts(run_id: str) -> Call[list[ArtifactRef]]:
        def read(content: bytes) -> list[ArtifactRef]:
            return _Artifacts.model_validate_json(content).artifacts

        return Call("GET", f"/runs/{run_id}/artifacts", read)

    @staticmethod
    def changed(run_id: str, status: str, timeout_s: float) -> Call[RunView]:
        """A long poll: answered the moment the run's status is no longer ``status``,
        or after ``timeout_s`` (at most 60) with the run as it stands."""
        others = ",".join(s.value for s in RunStatus if s.value != status)
        params = {"until": others, "timeout_s": f"{max(0.1, min(timeout_s, 60.0)):.1f}"}
        return Call(
            "GET", f"/runs/{run_id}/wait", RunView.model_validate_json,
            params=params, timeout=timeout_s + 30,
        )  # fmt: skip
