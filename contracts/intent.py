"""The intent request ``env.intent_request_v1`` and the shim's answer to it."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from contracts._base import Closed, Identifier, ShortText
from contracts._json import JsonObject
from contracts.budgets import Budgets
from contracts.plan import Plan

__all__ = ["IntentAccepted", "IntentRequest", "Mode"]


class Mode(StrEnum):
    PLAN_ONLY = "plan-only"
    RUN_PLAN = "run-plan"
    FULL_CYCLE = "full-cycle"


class IntentRequest(Closed):
    schema_id: Literal["env.intent_request_v1"] = "env.intent_request_v1"
    recipe: Identifier
    objective: ShortText
    parameters: JsonObject = Field(default_factory=dict)
    mode: Mode = Mode.FULL_CYCLE
    policy_profile: Identifier = "default"
    tool_pool: Identifier = "default"
    submitted_by: Identifier = "anonymous"
    plan: Plan | None = None
    # Narrows the profile's budgets for this run (a value above the profile's
    # is refused: budget_widened).
    budgets: Budgets | None = None

    @model_validator(mode="after")
    def _plan_only_with_run_plan(self) -> IntentRequest:
        if self.mode is Mode.RUN_PLAN and self.plan is None:
            raise ValueError("mode run-plan needs a plan")
        if self.mode is not Mode.RUN_PLAN and self.plan is not None:
            raise ValueError("a plan may only be supplied with mode run-plan")
        return self


class IntentAccepted(Closed):
    run_id: str
    intent_id: str
    status: str
    links: dict[str, str]
