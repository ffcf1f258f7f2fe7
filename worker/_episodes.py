"""Builders for the MOVA episodes a run leaves behind.

Episode ids are derived from (run, kind, subject), so writing the same
episode twice — a re-executed step — stores it once.
"""

from __future__ import annotations

from contracts import DataRef, EnvelopeRef, Episode, Executor, JsonObject, digest_of
from contracts.episode import ResultStatus
from ledger import now_iso

__all__ = ["episode", "security_episode"]


def _id(run_id: str, kind: str, subject: str) -> str:
    return "ep_" + digest_of([run_id, kind, subject])[:32]


def episode(
    *,
    run_id: str,
    kind: str,
    subject: str,
    episode_type: str,
    status: ResultStatus,
    summary: str,
    executor_id: str,
    details: JsonObject,
    outputs: list[DataRef] | None = None,
    inputs: list[DataRef] | None = None,
) -> Episode:
    return Episode(
        episode_id=_id(run_id, kind, subject),
        episode_type=episode_type,
        recorded_at=now_iso(),
        input_envelopes=[EnvelopeRef(envelope_type="env.intent_request_v1", envelope_id=run_id)],
        input_data_refs=inputs or [],
        executor=Executor(role="service", executor_id=executor_id, executor_kind="service"),
        result_status=status,
        result_summary=summary,
        result_details={"run_id": run_id, **details},
        output_data_refs=outputs or [],
    )


def security_episode(
    *, run_id: str, subject: str, code: str, message: str, executor_id: str, details: JsonObject
) -> Episode:
    return episode(
        run_id=run_id,
        kind="security",
        subject=subject,
        episode_type=f"security_event/{code}",
        status="failed",
        summary=message,
        executor_id=executor_id,
        details={"error_code": code, "severity": "medium", "actions_taken": ["refused"], **details},
    )
