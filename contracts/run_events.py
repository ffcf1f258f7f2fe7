"""One event of a run's stream (``GET /runs/{run_id}/events``), as sent in ``data``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed
from contracts._json import JsonObject

__all__ = ["RunEvent", "RunEventKind"]

RunEventKind = Literal[
    "run.accepted",
    "run.phase",
    "step.started",
    "step.finished",
    "ledger.written",
    "episode",
    "approval",
    "message",
]


class RunEvent(Closed):
    run_id: str
    seq: int = Field(ge=1)  # 1, 2, 3 … per run; the SSE id
    kind: RunEventKind
    at: str
    body: JsonObject
