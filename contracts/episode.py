"""Evidence episodes in the shape of MOVA 4.1.1 ``ds.mova_episode_core_v1``.

Field names and the ``result_status`` values are MOVA's; the episode core is
closed upstream, so Gatehouse-specific facts go in ``result_details``.
``SecurityEpisode`` adds the fields of ``ds.security_event_episode_core_v1``.

Upstream types every optional field as a plain string (never ``null``), so an
unset optional field is left out of the serialized episode rather than
written as ``null``; ``vendor/mova-4.1.1/`` holds the schemas they match.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from contracts._base import Closed
from contracts._json import JsonObject

__all__ = [
    "MOVA_VERSION",
    "SECURITY_MODEL_VERSION",
    "DataRef",
    "DetectionSource",
    "EnvelopeRef",
    "Episode",
    "Executor",
    "PolicyRef",
    "ResultStatus",
    "SecurityAction",
    "SecurityActionType",
    "SecurityCategory",
    "SecurityEpisode",
    "Severity",
]

MOVA_VERSION: Final = "4.1.1"
# global.security_catalog_v1: every upstream policy profile names this model version.
SECURITY_MODEL_VERSION: Final = "1.0.0"

ResultStatus = Literal[
    "pending", "in_progress", "completed", "failed", "partial", "cancelled", "skipped"
]
SecurityCategory = Literal[
    "auth",
    "authorization",
    "policy_violation",
    "instruction_misuse",
    "data_access",
    "rate_limit",
    "config",
    "infrastructure",
    "other",
]
Severity = Literal["info", "low", "medium", "high", "critical"]
DetectionSource = Literal[
    "human_review", "rule_engine", "runtime_guard", "external_system", "other"
]
# global.security_catalog_v1 security_action_type ids.
SecurityActionType = Literal["log", "alert", "block", "fallback"]


class _Record(Closed):
    """Serializes without the optional fields that are unset (MOVA has no ``null`` there)."""

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class EnvelopeRef(_Record):
    envelope_type: str
    envelope_id: str | None = None


class DataRef(_Record):
    data_type: str
    data_id: str | None = None
    sha256: str | None = None


class Executor(_Record):
    role: str
    executor_id: str
    executor_kind: str


class Episode(_Record):
    episode_id: str
    episode_type: str = Field(pattern=r"^(execution|plan|security_event|other)(/.+)?$")
    mova_version: Literal["4.1.1"] = MOVA_VERSION
    recorded_at: str
    started_at: str | None = None
    finished_at: str | None = None
    input_envelopes: list[EnvelopeRef] = Field(default_factory=list)
    input_data_refs: list[DataRef] = Field(default_factory=list)
    executor: Executor
    result_status: ResultStatus
    result_summary: str
    result_details: JsonObject = Field(default_factory=dict)
    output_data_refs: list[DataRef] = Field(default_factory=list)


class PolicyRef(_Record):
    policy_document_id: str | None = None
    rule_id: str | None = None
    policy_version: str | None = None


class SecurityAction(_Record):
    action_type: SecurityActionType
    taken_at: str | None = None
    actor: str | None = None
    status: Literal["completed", "failed", "skipped"] | None = None
    details: str | None = None


class SecurityEpisode(Episode):
    """MOVA 4.1.1 ``ds.security_event_episode_core_v1``: a refusal, as a security event."""

    episode_type: str = Field(pattern=r"^security_event(/.+)?$")
    security_event_type: str = Field(min_length=1)
    security_event_category: SecurityCategory
    severity: Severity
    security_model_version: str = SECURITY_MODEL_VERSION
    policy_profile_id: str | None = None
    policy_ref: PolicyRef | None = None
    detection_source: DetectionSource | None = None
    actions_taken: list[SecurityAction] = Field(default_factory=list)
