"""Running policy tests (``contracts.PolicyTestFile``): each case's plan through the
gate, step by step, for its submitter, against the expected decisions. Pure: the
caller reads the files and gives the profile and tool pool to test under."""

from __future__ import annotations

from dataclasses import dataclass

from contracts import (
    PolicyExpectation,
    PolicyProfile,
    PolicyTestCase,
    ToolPool,
)
from policies.cedar_gate import bound
from policies.gate import PLAN_LEVEL, StepVerdict, decide_plan

__all__ = ["CaseResult", "StepOutcome", "run_case"]


@dataclass(frozen=True)
class StepOutcome:
    step_id: str
    expected: str  # as written: allow, deny, or a code (with the policies, if named)
    got: str  # allow, or the refusing code (with the Cedar policies that denied it)
    message: str | None
    ok: bool


@dataclass(frozen=True)
class CaseResult:
    name: str
    steps: list[StepOutcome]
    problems: list[str]  # what is wrong with the case itself (a step with no expectation)

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.ok for s in self.steps)


def _shown(decision: str, policies: list[str] | None) -> str:
    return decision if not policies else f"{decision} {sorted(policies)}"


def _meets(verdict: StepVerdict, want: PolicyExpectation) -> bool:
    if want.decision == "allow":
        return verdict.allowed
    if verdict.allowed:
        return False
    if want.decision not in ("deny", verdict.code):
        return False
    return want.policies is None or sorted(want.policies) == sorted(verdict.policy_ids)


def run_case(case: PolicyTestCase, profile: PolicyProfile, pool: ToolPool) -> CaseResult:
    """One case: every step decided by the gate for the case's submitter."""
    verdicts = decide_plan(case.plan, pool, bound(profile, case.submitted_by), case.inputs)
    by_step = {v.step_id: v for v in verdicts}
    problems = [
        f"step {s.step_id!r} has no expectation"
        for s in case.plan.steps
        if s.step_id not in case.expect
    ]
    problems += [
        f"expectation for {sid!r}, which the plan does not have"
        for sid in case.expect
        if sid not in by_step
    ]
    outcomes: list[StepOutcome] = []
    for verdict in verdicts:
        raw = case.expect.get(verdict.step_id)
        if raw is None:
            if verdict.step_id == PLAN_LEVEL:  # refusing the whole plan fails the case
                got = verdict.code or "deny"
                outcomes.append(StepOutcome(PLAN_LEVEL, "allow", got, verdict.message, False))
            continue
        want = raw if isinstance(raw, PolicyExpectation) else PolicyExpectation(decision=raw)
        got = "allow" if verdict.allowed else _shown(verdict.code or "deny", verdict.policy_ids)
        outcomes.append(
            StepOutcome(
                verdict.step_id,
                _shown(want.decision, want.policies),
                got,
                verdict.message,
                _meets(verdict, want),
            )
        )
    return CaseResult(case.name, outcomes, problems)
