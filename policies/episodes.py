"""Builders for the MOVA 4.1.1 episodes a run (or a refused request) leaves behind.

Pure functions: the caller passes the time (``recorded_at``), nothing is read
or written here. Episode ids are derived from (run, kind, subject), so writing
the same episode twice — a re-executed step — stores it once.

Every episode built here validates against ``vendor/mova-4.1.1/``
(``ds.mova_episode_core_v1``, ``ds.security_event_episode_core_v1``).
"""

from __future__ import annotations

from typing import Final

from contracts import (
    DataRef,
    EnvelopeRef,
    Episode,
    ErrorCode,
    Executor,
    JsonObject,
    JsonValue,
    RunStatus,
    SecurityEpisode,
    digest_of,
)
from contracts.episode import SECURITY_MODEL_VERSION, PolicyRef, ResultStatus, SecurityAction
from policies.security import classify

__all__ = [
    "SECURITY_EVENT_NAMESPACE",
    "budget_episode",
    "decision_episode",
    "episode",
    "episode_id",
    "run_summary_episode",
    "security_episode",
]

# Gatehouse's refusal codes are not in global.security_catalog_v1's
# security_event_type list; upstream allows namespaced custom types.
SECURITY_EVENT_NAMESPACE: Final = "gatehouse"
_INTENT_ENVELOPE: Final = "env.intent_request_v1"


def episode_id(run_id: str, kind: str, subject: str) -> str:
    """The deterministic id of the episode recording ``subject`` of kind ``kind`` in a run."""
    return "ep_" + digest_of([run_id, kind, subject])[:32]


def _executor(executor_id: str) -> Executor:
    return Executor(role="service", executor_id=executor_id, executor_kind="service")


def _inputs(run_id: str | None) -> list[EnvelopeRef]:
    # MOVA asks for input_envelopes or input_data_refs; an empty list is present.
    return [EnvelopeRef(envelope_type=_INTENT_ENVELOPE, envelope_id=run_id)] if run_id else []


def episode(
    *,
    run_id: str,
    kind: str,
    subject: str,
    episode_type: str,
    status: ResultStatus,
    summary: str,
    executor_id: str,
    recorded_at: str,
    details: JsonObject,
    outputs: list[DataRef] | None = None,
    inputs: list[DataRef] | None = None,
) -> Episode:
    return Episode(
        episode_id=episode_id(run_id, kind, subject),
        episode_type=episode_type,
        recorded_at=recorded_at,
        input_envelopes=_inputs(run_id),
        input_data_refs=inputs or [],
        executor=_executor(executor_id),
        result_status=status,
        result_summary=summary,
        result_details={"run_id": run_id, **details},
        output_data_refs=outputs or [],
    )


# How a run's summary episode reads each way a run ends (MOVA's result status).
_SUMMARY_STATUS: dict[RunStatus, ResultStatus] = {
    RunStatus.SUCCEEDED: "completed",
    RunStatus.PLANNED: "completed",
    RunStatus.REJECTED: "cancelled",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
}


def run_summary_episode(
    *,
    run_id: str,
    status: RunStatus,
    steps: list[JsonValue],
    error_code: str | None,
    trace_digest: str | None,
    executor_id: str,
    recorded_at: str,
    summary: str | None = None,
) -> Episode:
    """The episode that closes a run: how it ended, its steps, its trace digest.
    ``summary``: what it says (default ``run <status>``)."""
    return episode(
        run_id=run_id,
        kind="summary",
        subject="run",
        episode_type="execution/run_summary",
        status=_SUMMARY_STATUS[status],
        summary=summary if summary is not None else f"run {status.value}",
        executor_id=executor_id,
        recorded_at=recorded_at,
        details={
            "status": status.value,
            "steps": steps,
            "error_code": error_code,
            "trace_digest": trace_digest,
        },
    )


def decision_episode(
    run_id: str, plan_digest: str, decision: str, decided_by: str, recorded_at: str
) -> Episode:
    """The record of a decision on a plan, whoever writes it (the worker when the run
    reads the decision, the shim when it takes one for a parked run)."""
    return episode(
        run_id=run_id,
        kind="decision",
        subject=plan_digest,
        episode_type="execution/approval",
        status="completed",
        summary=f"plan {decision} by {decided_by}",
        executor_id=decided_by,
        recorded_at=recorded_at,
        details={"plan_digest": plan_digest, "decision": decision, "decided_by": decided_by},
    )


def budget_episode(
    *, run_id: str, budgets: JsonObject, message: str, executor_id: str, recorded_at: str
) -> Episode:
    """The run was stopped by one of its budgets: which one, used / limit of every kind."""
    exceeded = budgets.get("exceeded")
    return episode(
        run_id=run_id,
        kind="budget",
        subject=str(exceeded),
        episode_type="execution/budget_exceeded",
        status="failed",
        summary=f"budget exceeded: {message}" if message else "budget exceeded",
        executor_id=executor_id,
        recorded_at=recorded_at,
        details={
            "error_code": ErrorCode.BUDGET_EXCEEDED.value,
            "budget": exceeded,
            "limits": budgets.get("limits"),
            "used": budgets.get("used"),
        },
    )


def security_episode(
    *,
    run_id: str | None,
    subject: str,
    code: ErrorCode,
    message: str,
    executor_id: str,
    recorded_at: str,
    details: JsonObject,
    profile_id: str | None = None,
    profile_version: str | None = None,
) -> SecurityEpisode:
    """A refusal as a MOVA security event: what was blocked, why, and by which rule."""
    category, severity = classify(code)
    policy_ref = None
    if profile_id is not None:
        policy_ref = PolicyRef(
            policy_document_id=f"gatehouse:profile/{profile_id}",
            rule_id=code.value,
            policy_version=profile_version,
        )
    return SecurityEpisode(
        episode_id=episode_id(run_id or "", "security", subject),
        episode_type=f"security_event/{code.value}",
        recorded_at=recorded_at,
        input_envelopes=_inputs(run_id),
        executor=_executor(executor_id),
        result_status="failed",
        result_summary=message,
        result_details={"run_id": run_id, "error_code": code.value, **details},
        security_event_type=f"{SECURITY_EVENT_NAMESPACE}:{code.value}",
        security_event_category=category,
        severity=severity,
        security_model_version=SECURITY_MODEL_VERSION,
        policy_profile_id=profile_id,
        policy_ref=policy_ref,
        detection_source="runtime_guard",
        actions_taken=[
            SecurityAction(
                action_type="block",
                taken_at=recorded_at,
                actor=executor_id,
                status="completed",
                details=f"refused: {code.value}",
            )
        ],
    )
