"""What-if over recorded runs (``gatehouse policy what-if``): each recorded plan
decided under the rules of its time and under proposed rules, and the steps whose
decision would change."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed
from contracts._json import JsonObject
from contracts.plan import Plan

__all__ = [
    "RecordedPlan",
    "RecordedRevision",
    "RecordedStep",
    "RunChanges",
    "StepChange",
    "WhatIfReport",
]


class RecordedStep(Closed):
    """A step the run reached (its ``run_steps`` row): it ran, or was refused right
    before it would have."""

    status: str  # succeeded / failed
    # a succeeded step's output: what a later step's input_from read
    output: JsonObject | None = None


class RecordedRevision(Closed):
    """One revision of a run's plan (``plan_revisions``), oldest first, and who approved it."""

    plan_digest: str
    approved_by: str | None  # decided_by of the decision that approved it; None: not approved
    plan: Plan | None = None  # None: the newest revision, ``RecordedPlan.plan``


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
    # What the run did with it: the steps it reached, by id, and every revision its
    # plan had with who approved each (a step ran under the approval of its revision).
    steps: dict[str, RecordedStep] = Field(default_factory=dict)
    revisions: list[RecordedRevision] = Field(default_factory=list)


class StepChange(Closed):
    step_id: str
    change: Literal["now_refused", "newly_allowed"]
    code: str  # the refusing code: the new one (now_refused) or the old one (newly_allowed)
    reason: str
    policy_ids: list[str] = Field(default_factory=list)  # Cedar policies that deny (or denied)
    # "ran": decided as at submit and again on the input it ran with (or was refused
    # on, right before it ran), approved by ``approved_by``; "planned": the step never
    # ran, decided as at submit only (a step taking an earlier output on the plan's own input)
    decided_as: Literal["ran", "planned"] = "planned"
    approved_by: str | None = None  # Cedar's context.approver when it ran


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
    steps_ran: int = 0  # of them, those decided on the input they ran with ("ran")
    steps_now_refused: int
    steps_newly_allowed: int
    runs: list[RunChanges]  # the runs with a changed decision, oldest first
