"""Every refused request leaves a MOVA security episode (not found is no refusal)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from contracts import ErrorCode, GatehouseError, JsonValue, digest_of
from ledger import evidence, iso, now_iso
from policies.episodes import security_episode
from shim.api.services.core import Service

__all__ = ["record_refusal"]

# Answers that are not refusals of anything: nothing to record.
_NOT_REFUSALS = frozenset(
    {
        ErrorCode.NOT_FOUND,
        ErrorCode.RUN_NOT_FOUND,
        ErrorCode.ARTIFACT_NOT_FOUND,
        ErrorCode.CALL_NOT_FOUND,
        ErrorCode.OPA_OUTPUT_UNAVAILABLE,  # a run's output archive not there (yet): refused nothing
        ErrorCode.METHOD_NOT_ALLOWED,
        ErrorCode.DATABASE_UNAVAILABLE,
        ErrorCode.STORAGE_FULL,
        ErrorCode.INTERNAL_ERROR,
        # The model failed an explain: recorded in the ledger and as an episode, refused nothing.
        ErrorCode.EXPLAIN_UNAVAILABLE,
        ErrorCode.EXPLAIN_INVALID,
    }
)


def record_refusal(
    service: Service,
    exc: GatehouseError,
    who: str | None,
    route: str,
    *,
    run_id: str | None,
    token_id: str | None = None,
    address: str = "-",
    template: str | None = None,
    repeats: int = 1,
) -> None:
    """Record a refused request as a security event.

    ``token_id`` names the caller's token when one matched, refused or not.
    Repeats of one refusal — its code, source ``address``, identity (or none), token
    (a revoked or expired one is named, though it identifies nobody) and ``template``
    (method and route template; default ``route``) — within the window
    (``event_window_s`` from the first) are counted on the first one's row instead of
    adding rows: a flood leaves a bounded number of rows. ``repeats``: refusals this
    call stands for (the door counts rate-limited ones in memory and writes them
    together). One write at a time per shim process, so a burst of refusals holds one
    database connection, and two repeats never open two rows."""
    if exc.code in _NOT_REFUSALS:
        return
    now = now_iso()
    refused_token = exc.details.get("token_id")
    token_id = token_id or (refused_token if isinstance(refused_token, str) else None)
    tokens: dict[str, JsonValue] = {"token_id": token_id} if token_id else {}
    fingerprint = digest_of([exc.code.value, address, who or "", template or route, token_id or ""])
    episode = security_episode(
        run_id=run_id,
        subject=f"request:{uuid.uuid4().hex}",
        code=exc.code,
        message=exc.message,
        executor_id="gatehouse-shim",
        recorded_at=now,
        details={
            "route": route,
            "identity": who,
            **tokens,
            "address": address,
            "refusal": exc.details,
        },
    )
    since = datetime.now(UTC) - timedelta(seconds=service.settings.event_window_s)
    with service.refusals, service.db.engine.begin() as conn:
        evidence.put_security_event(
            conn,
            episode_id=episode.episode_id,
            run_id=run_id,
            error_code=exc.code.value,
            category=episode.security_event_category,
            severity=episode.severity,
            body=episode.model_dump(mode="json"),
            recorded_at=now,
            fingerprint=fingerprint,
            open_since=iso(since),
            repeats=repeats,
        )
