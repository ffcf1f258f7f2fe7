"""Evidence episodes in the shape of MOVA 4.1.1 ``ds.mova_episode_core_v1``.

Field names and the ``result_status`` values are MOVA's; the episode core is
closed upstream, so Gatehouse-specific facts go in ``result_details``.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts._base import Closed
from contracts._json import JsonObject

__all__ = ["DataRef", "EnvelopeRef", "Episode", "Executor", "ResultStatus"]

MOVA_VERSION: Final = "4.1.1"

ResultStatus = Literal[
    "pending", "in_progress", "completed", "failed", "partial", "cancelled", "skipped"
]


class EnvelopeRef(Closed):
    envelope_type: str
    envelope_id: str | None = None


class DataRef(Closed):
    data_type: str
    data_id: str | None = None
    sha256: str | None = None


class Executor(Closed):
    role: str
    executor_id: str
    executor_kind: str


class Episode(Closed):
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
