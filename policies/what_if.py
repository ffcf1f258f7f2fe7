"""What would proposed rules have done? Each recorded plan decided, step by step, under
the rules of its time (the profile, tool pool and Cedar policy set versions the run
ran under, kept by digest) and under the proposed rules, for the run's submitter;
the steps whose decision flips are reported with the reasons. Pure: the caller reads
the ledger (``ledger.recorded_plans``, ``ledger.policy_versions``) and gives it here.

Each step is decided as the run decided it. Every step as at submit (the plan's own
input, no approver); a step the run reached (it ran, or was refused right before it
would have) again as right before it ran: on its input with ``input_from`` resolved
from the outputs the ledger recorded, and with Cedar's ``context.approver`` the person
whose decision approved the plan revision it ran under. A step the run never reached
keeps the decision at submit (``decided_as``: "planned").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import BaseModel

from contracts import (
    CedarRules,
    GatehouseError,
    JsonObject,
    Plan,
    PolicyProfile,
    RecordedPlan,
    RunChanges,
    StepChange,
    ToolPool,
    WhatIfReport,
)
from policies import catalog, their_time
from policies.catalog import Loaded
from policies.cedar_gate import approved, bound
from policies.gate import StepVerdict, check_step, decide_plan
from policies.inputs import resolve_input
from policies.taint import check_resolved

__all__ = ["Proposal", "Ran", "RulesOfTheirTime", "ran_steps", "what_if"]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Proposal:
    """Proposed rules: a whole profile (for the runs of that profile id), or a Cedar
    policy set (for the runs whose profile named a set of that id, or of ``profile``)."""

    profile: PolicyProfile | None = None
    cedar: CedarRules | None = None
    for_profile: str | None = None  # a Cedar set given for this profile's runs

    def applies(self, then: PolicyProfile) -> PolicyProfile | None:
        """The proposed rules for a run held to ``then`` (None: not for this run)."""
        if self.profile is not None:
            return self.profile if then.profile_id == self.profile.profile_id else None
        cedar = self.cedar
        if cedar is None:
            return None
        if self.for_profile is not None:
            if then.profile_id != self.for_profile:
                return None
        elif then.cedar != cedar.policy_set_id:
            return None
        return then.model_copy(update={"cedar": cedar.policy_set_id, "cedar_rules": cedar})

    @property
    def name(self) -> str:
        if self.profile is not None:
            return f"profile {self.profile.profile_id}"
        cedar = self.cedar
        return "nothing" if cedar is None else f"Cedar policy set {cedar.policy_set_id}"


@dataclass(frozen=True)
class _Body:
    policy_id: str
    body: str


class RulesOfTheirTime:
    """The rules each run ran under, as a replay resolves them (``policies.their_time``):
    the version kept by the digest it recorded; today's file when it is that very
    version, or when none was kept. A kept body that does not load or no longer has its
    digest is refused (``corrupt_record``), as in a replay."""

    def __init__(self, kept: Mapping[str, tuple[str, str]]) -> None:
        self.kept = kept  # digest -> (policy id, body)
        self._resolved: dict[tuple[str, str | None, str | None], object] = {}

    def _lookup(self, digest: str) -> _Body | None:
        found = self.kept.get(digest)
        return None if found is None else _Body(*found)

    def _version(self, model: type[M], today: Loaded[M] | None, digest: str | None) -> M | None:
        key = (model.__name__, None if today is None else today.digest, digest)
        if key not in self._resolved:  # each version parsed once for every run held to it
            found = their_time.version(model, today, digest, self._lookup)
            self._resolved[key] = None if found is None else found.model
        held = self._resolved[key]
        return held if isinstance(held, model) else None

    def of(self, run: RecordedPlan) -> tuple[PolicyProfile, ToolPool] | None:
        """None when the profile, tool pool or Cedar policy set the run ran under is
        neither in force today nor kept (the run cannot be judged by the rules of its
        time)."""
        profile = self._version(
            PolicyProfile, _today(catalog.profile, run.policy_profile), run.profile_digest
        )
        pool = self._version(
            ToolPool, _today(catalog.tool_pool, run.tool_pool), run.tool_pool_digest
        )
        if profile is None or pool is None:
            return None
        if profile.cedar is None:
            return profile, pool
        rules = their_time.cedar_rules(profile, run.cedar_digest, self._lookup)
        if rules is None:
            return None  # its Cedar policy set neither in force nor kept: judged by none
        return profile.model_copy(update={"cedar_rules": rules}), pool


def _today(find: Callable[[str], Loaded[M]], policy_id: str) -> Loaded[M] | None:
    try:
        return find(policy_id)
    except GatehouseError:  # unknown_profile / unknown_tool_pool: no longer in force
        return None


@dataclass(frozen=True)
class Ran:
    """How a step the run reached was decided right before it ran."""

    input: JsonObject  # its input, input_from resolved
    approved_by: str | None  # who approved the revision it ran under (context.approver)


def _kept(before: Plan, after: Plan) -> int:
    """How many leading steps a revision kept as they were: the steps done before it
    (a repair, an outside value written in, a new turn changes or adds from there)."""
    kept = 0
    for old, new in zip(before.steps, after.steps, strict=False):  # a shorter one ends it
        if old != new:
            break
        kept += 1
    return kept


def _approvers(run: RecordedPlan) -> list[str | None]:
    """By position in the newest plan: who approved the revision that step ran under
    (the newest revision that did not keep it as already done)."""
    out: list[str | None] = [None] * len(run.plan.steps)
    previous: Plan | None = None
    for revision in run.revisions:
        plan = run.plan if revision.plan is None else revision.plan
        start = 0 if previous is None else _kept(previous, plan)
        out[start:] = [revision.approved_by] * (len(out) - start)
        previous = plan
    return out


def ran_steps(run: RecordedPlan) -> dict[str, Ran]:
    """The steps of the run's newest plan that the run reached, by id, with the input
    each had (its input_from resolved from the outputs the ledger recorded) and its
    approver. A step whose input does not resolve was never decided at run time."""
    if not run.steps:
        return {}
    outputs = {
        sid: s.output
        for sid, s in run.steps.items()
        if s.status == "succeeded" and s.output is not None
    }
    approvers = _approvers(run)
    out: dict[str, Ran] = {}
    for position, step in enumerate(run.plan.steps):
        if step.step_id not in run.steps:
            continue
        try:
            step_input = resolve_input(step, outputs)
        except GatehouseError:  # input_resolution_failed: it stopped before the gate
            continue
        out[step.step_id] = Ran(step_input, approvers[position])
    return out


def _decide(
    plan: Plan, pool: ToolPool, profile: PolicyProfile, ran: Mapping[str, Ran]
) -> list[StepVerdict]:
    """Every step as at submit; a step the run reached, if allowed then, again as
    right before it ran (the flow's checks: the outside value, then the gate)."""
    verdicts = decide_plan(plan, pool, profile)
    if not ran:
        return verdicts
    steps = {s.step_id: s for s in plan.steps}
    # A policy set that never names the approver cannot tell a request with one from
    # the same request without: a step on its own input is then decided as at submit.
    rules = profile.cedar_rules
    sees_approver = rules is not None and "approver" in rules.text
    by_approver: dict[str | None, PolicyProfile] = {}
    out: list[StepVerdict] = []
    for verdict in verdicts:
        found = ran.get(verdict.step_id)
        step = steps.get(verdict.step_id)
        if found is None or step is None or not verdict.allowed:
            out.append(verdict)
            continue
        if step.input_from is None and (found.approved_by is None or not sees_approver):
            out.append(verdict)  # the same request as at submit
            continue
        who = by_approver.get(found.approved_by)
        if who is None:
            who = by_approver[found.approved_by] = approved(profile, found.approved_by)
        try:
            check_resolved(step, plan, profile, found.input)
            check_step(step, found.input, pool, who)
        except GatehouseError as exc:
            out.append(StepVerdict.refused(step.step_id, exc))
            continue
        out.append(verdict)
    return out


def _change(
    verdict: StepVerdict, change: Literal["now_refused", "newly_allowed"], ran: Mapping[str, Ran]
) -> StepChange:
    found = ran.get(verdict.step_id)
    return StepChange(
        step_id=verdict.step_id,
        change=change,
        code=verdict.code or "",
        reason=verdict.message or "",
        policy_ids=verdict.policy_ids,
        decided_as="planned" if found is None else "ran",
        approved_by=None if found is None else found.approved_by,
    )


def _changes(
    before: list[StepVerdict], after: list[StepVerdict], ran: Mapping[str, Ran]
) -> list[StepChange]:
    was = {v.step_id: v for v in before}
    out: list[StepChange] = []
    for now in after:
        then = was.get(now.step_id)
        allowed_then = then.allowed if then is not None else True
        if allowed_then and not now.allowed:
            out.append(_change(now, "now_refused", ran))
        elif then is not None and not then.allowed and now.allowed:
            out.append(_change(then, "newly_allowed", ran))
    now_ids = {v.step_id for v in after}
    for then in before:  # a refusal of the whole plan that the proposed rules drop
        if then.step_id not in now_ids and not then.allowed:
            out.append(_change(then, "newly_allowed", ran))
    return out


def what_if(
    runs: Iterable[RecordedPlan], proposal: Proposal, rules: RulesOfTheirTime, digest: str
) -> WhatIfReport:
    """Every run the proposal applies to, decided both ways; the changed ones reported."""
    read = skipped = evaluated = steps = steps_ran = refused = allowed = 0
    changed: list[RunChanges] = []
    for run in runs:
        read += 1
        found_rules = rules.of(run)
        if found_rules is None:
            skipped += 1
            continue
        then, pool = found_rules
        proposed = proposal.applies(then)
        if proposed is None:
            continue
        evaluated += 1
        steps += len(run.plan.steps)
        ran = ran_steps(run)
        steps_ran += len(ran)
        before = _decide(run.plan, pool, bound(then, run.submitted_by), ran)
        after = _decide(run.plan, pool, bound(proposed, run.submitted_by), ran)
        found = _changes(before, after, ran)
        if not found:
            continue
        refused += sum(c.change == "now_refused" for c in found)
        allowed += sum(c.change == "newly_allowed" for c in found)
        changed.append(
            RunChanges(
                run_id=run.run_id,
                created_at=run.created_at,
                submitted_by=run.submitted_by,
                policy_profile=run.policy_profile,
                changes=found,
            )
        )
    return WhatIfReport(
        proposed=f"{proposal.name} ({digest[:12]})",
        runs_read=read,
        runs_skipped=skipped,
        runs_evaluated=evaluated,
        runs_changed=len(changed),
        steps_evaluated=steps,
        steps_ran=steps_ran,
        steps_now_refused=refused,
        steps_newly_allowed=allowed,
        runs=changed,
    )
