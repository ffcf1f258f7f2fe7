"""opencode: one turn of an OpenCode agent in the run's workspace, under the
profile's executor policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from contracts import (
    Connector,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PlanStep,
    ToolPool,
)
from policies.cedar_vocab import attr, set_of_strings
from policies.kinds._base import KindRules, Said, Wrong, require_str, short, string_into

__all__ = ["Opencode"]


class Opencode(KindRules):
    kind: ClassVar[DriverKind] = DriverKind.OPENCODE
    never_data: ClassVar[tuple[str, ...]] = ("",)  # a prompt or subgoal is an instruction
    agent_turn: ClassVar[bool] = True

    def check_input(
        self, step: PlanStep, step_input: JsonObject, connector: Connector, details: JsonObject
    ) -> None:
        require_str(step, step_input, "prompt")
        subgoals = step_input.get("subgoals", [])
        extra = sorted(set(step_input) - {"prompt", "subgoals"})
        if extra or not isinstance(subgoals, list) or not all(isinstance(g, str) for g in subgoals):
            raise GatehouseError(
                ErrorCode.PLAN_INVALID,
                f"step {step.step_id!r} takes a prompt and optional subgoals (strings) only",
                {**details, "unexpected": list[JsonValue](extra)},
            )

    def cedar_schema(self, pools: Sequence[ToolPool]) -> dict[str, JsonValue]:
        return {"prompt": attr("String", False), "subgoals": set_of_strings(False)}

    def cedar_context(self, step_input: JsonObject, pool: ToolPool, wrong: Wrong) -> JsonObject:
        out: JsonObject = {}
        string_into(out, step_input, "prompt", wrong)
        goals = step_input.get("subgoals", [])
        if not isinstance(goals, list) or not all(isinstance(g, str) for g in goals):
            wrong("subgoals", "a list of strings")
        out["subgoals"] = (
            [g for g in goals if isinstance(g, str)] if isinstance(goals, list) else []
        )
        return out

    def said(self, given: JsonObject, connector_id: str) -> Said:
        return Said(
            "Asks an OpenCode agent, who may edit the workspace:"
            f" “{short(given.get('prompt', ''))}”",
            agent=True,
        )
