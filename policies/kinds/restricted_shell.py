"""restricted_shell: one allowlisted program run in the sandbox (no network)."""

from __future__ import annotations

import json
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
from policies.commands import check_argv
from policies.kinds._base import KindRules, Said, Wrong, short
from policies.step_inputs import shell_input

__all__ = ["RestrictedShell"]


def _flag(value: JsonValue) -> bool:
    if isinstance(value, str):
        return value.startswith("-")
    if isinstance(value, list):
        return any(_flag(v) for v in value)
    return False


def _argv(given: JsonObject) -> list[str]:
    raw = given.get("argv")
    return [a for a in raw if isinstance(a, str)] if isinstance(raw, list) else []


class RestrictedShell(KindRules):
    kind: ClassVar[DriverKind] = DriverKind.RESTRICTED_SHELL
    never_data: ClassVar[tuple[str, ...]] = ("/argv/0",)
    runs_a_program: ClassVar[bool] = True

    def check_input(
        self, step: PlanStep, step_input: JsonObject, connector: Connector, details: JsonObject
    ) -> None:
        argv = step_input.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise GatehouseError(
                ErrorCode.PLAN_INVALID,
                f"step {step.step_id!r} needs an argv list of strings",
                details,
            )
        check_argv(_argv(step_input), connector)
        found = shell_input(step_input)
        if isinstance(found, str):  # what the handler would refuse, refused now
            raise GatehouseError(ErrorCode.PLAN_INVALID, f"step {step.step_id!r}: {found}", details)

    def cedar_schema(self, pools: Sequence[ToolPool]) -> dict[str, JsonValue]:
        return {
            "program": attr("String", False),
            "args": set_of_strings(False),
            "argc": attr("Long", False),
        }

    def cedar_context(self, step_input: JsonObject, pool: ToolPool, wrong: Wrong) -> JsonObject:
        raw = step_input.get("argv")
        if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
            wrong("argv", "a list of strings")
        argv = _argv(step_input)
        if not argv:
            return {}
        return {"program": argv[0], "args": list[JsonValue](argv[1:]), "argc": len(argv) - 1}

    def said(self, given: JsonObject, connector_id: str) -> Said:
        words = _argv(given)
        return Said(
            f"Runs `{short(' '.join(words))}` in the sandbox",
            command=words[0] if words else None,
        )

    def request(
        self, given: JsonObject, connector_id: str, connector: Connector | None
    ) -> str | None:
        return (
            "argv: "
            + json.dumps(given.get("argv"), ensure_ascii=False)
            + "\n(in the sandbox: the run's workspace, no network)"
        )

    def outside_value_problem(self, value: JsonValue) -> str | None:
        return "a value from outside the plan may not be a flag" if _flag(value) else None
