"""The one typed input of the intent workflow (``env.intent_job_v1``).

Queued work outlives code changes, so the workflow takes a single JSON object
rather than positional arguments; new optional fields keep old jobs readable.
"""

from __future__ import annotations

from typing import Literal

from contracts._base import Closed
from contracts.intent import IntentRequest
from contracts.opa_run import OpaJob

__all__ = ["IntentJob", "StretchJob"]

# Recovery resumes a workflow only under the version it started with, and the
# shim enqueues under this one; bump it when a change to the workflow code
# would replay old runs differently.
APP_VERSION = "gatehouse-6"


class IntentJob(Closed):
    schema_id: Literal["env.intent_job_v1"] = "env.intent_job_v1"
    run_id: str
    intent_id: str
    request: IntentRequest
    opa: OpaJob | None = None  # the run was submitted as an OPA archive
    # The run is split at every human decision (a stretch per decision). A job
    # enqueued before stretches existed lacks it: that run waits in place.
    stretched: bool = False
    # A fork (``gatehouse runs fork``): its parent's calls before this plan step
    # (1-based) are answered from the parent's ledger.
    fork_from_step: int | None = None


class StretchJob(Closed):
    """The input of a run's stretch after a decision (``gatehouse.stretch``)."""

    schema_id: Literal["env.stretch_job_v1"] = "env.stretch_job_v1"
    run_id: str
    stretch: int
    resume_wait: int  # the flow's wait the run was parked at (0: its first)
    until: str | None = None  # that wait's expiry, ISO 8601
