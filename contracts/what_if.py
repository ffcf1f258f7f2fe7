"""What-if over recorded runs (``gatehouse policy what-if``): each recorded plan
decided under the rules of its time and under proposed rules, and the steps whose
decision would change."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed
from contracts.plan import Plan

__all__ = ["RecordedPlan", "RunChanges", "StepChange", "WhatIfReport"]


class RecordedPlan(Closed):
    """A run's plan as the ledger holds it (its plan card: the newest revision), and
    the versions of the rules it ran under."""

    run_id: str
    created_at: str
    submitted_by: str
    policy_profile: str
    tool_pool: str
    profile_digest: str | None
    tool_pool_digest: str | None
    cedar_digest: str | None
    plan: Plan


class StepChange(Closed):
    step_id: str
    change: Literal["now_refused", "newly_allowed"]
    code: str  # the refusing code: the new one (now_refused) or the old one (newly_allowed)
    reason: str
    policy_ids: list[str] = Field(default_factory=list)  # Cedar policies that deny (or denied)


class RunChanges(Closed):
    run_id: str
    created_at: str
    submitted_by: str
    policy_profile: str
    changes: list[StepChange]


class WhatIfReport(Closed):
    proposed: str  # what was proposed: a profile id or a Cedar policy set id, and its digest
    runs_read: int  # recorded plans read
    # of them, those whose profile or tool pool is neither in force nor kept
    runs_skipped: int = 0
    runs_evaluated: int  # of them, those the proposed rules apply to
    runs_changed: int
    steps_evaluated: int
    steps_now_refused: int
    steps_newly_allowed: int
    runs: list[RunChanges]  # the runs with a changed decision, oldest first
