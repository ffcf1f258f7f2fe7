"""What would proposed rules have done? Each recorded plan decided, step by step, under
the rules of its time (the profile, tool pool and Cedar policy set versions the run
ran under, kept by digest) and under the proposed rules, for the run's submitter;
the steps whose decision flips are reported with the reasons. Pure: the caller reads
the ledger (``ledger.recorded_plans``, ``ledger.policy_versions``) and gives it here.

Steps are decided as at compile time: a step that takes an earlier step's output is
decided on the plan's own input (the resolved value is not part of the plan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts import (
    CedarRules,
    GatehouseError,
    PolicyProfile,
    RecordedPlan,
    RunChanges,
    StepChange,
    ToolPool,
    WhatIfReport,
)
from policies import catalog
from policies.catalog import Loaded
from policies.cedar_gate import bound
from policies.gate import StepVerdict, decide_plan

__all__ = ["Proposal", "RulesOfTheirTime", "what_if"]

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


class RulesOfTheirTime:
    """The rules each run ran under: the version kept by the digest it recorded; today's
    file when it is that very version, or when none was kept (as a replay does)."""

    def __init__(self, kept: Mapping[str, tuple[str, str]]) -> None:
        self.kept = kept  # digest -> (policy id, body)
        self._parsed: dict[tuple[str, str | None], object] = {}

    def _version(self, model: type[M], today: Loaded[M] | None, digest: str | None) -> M | None:
        kept = None if digest is None else self.kept.get(digest)
        if today is not None and (kept is None or digest == today.digest):
            return today.model
        if kept is None or digest is None:
            return None  # neither in force nor kept
        key = (model.__name__, digest)
        found = self._parsed.get(key)
        if not isinstance(found, model):
            try:
                found = model.model_validate_json(kept[1])
            except ValidationError:
                return None if today is None else today.model
            self._parsed[key] = found
        return found

    def _cedar(self, profile: PolicyProfile, digest: str | None) -> PolicyProfile:
        if profile.cedar is None:
            return profile
        rules = profile.cedar_rules
        if rules is None or (digest is not None and digest != rules.digest):
            kept = None if digest is None else self.kept.get(digest)
            if kept is not None:
                rules = CedarRules(policy_set_id=kept[0], digest=digest or "", text=kept[1])
            elif rules is None:
                found = catalog.cedar_policy_set(profile.cedar)
                rules = None if found is None else found.model
        return profile.model_copy(update={"cedar_rules": rules})

    def of(self, run: RecordedPlan) -> tuple[PolicyProfile, ToolPool] | None:
        """None when the profile or tool pool the run ran under is neither in force
        today nor kept (the run cannot be judged by the rules of its time)."""
        profile = self._version(
            PolicyProfile, _today(catalog.profile, run.policy_profile), run.profile_digest
        )
        pool = self._version(
            ToolPool, _today(catalog.tool_pool, run.tool_pool), run.tool_pool_digest
        )
        if profile is None or pool is None:
            return None
        return self._cedar(profile, run.cedar_digest), pool


def _today(find: Callable[[str], Loaded[M]], policy_id: str) -> Loaded[M] | None:
    try:
        return find(policy_id)
    except GatehouseError:  # unknown_profile / unknown_tool_pool: no longer in force
        return None


def _changes(before: list[StepVerdict], after: list[StepVerdict]) -> list[StepChange]:
    was = {v.step_id: v for v in before}
    out: list[StepChange] = []
    for now in after:
        then = was.get(now.step_id)
        allowed_then = then.allowed if then is not None else True
        if allowed_then and not now.allowed:
            out.append(
                StepChange(
                    step_id=now.step_id,
                    change="now_refused",
                    code=now.code or "",
                    reason=now.message or "",
                    policy_ids=now.policy_ids,
                )
            )
        elif then is not None and not then.allowed and now.allowed:
            out.append(
                StepChange(
                    step_id=now.step_id,
                    change="newly_allowed",
                    code=then.code or "",
                    reason=then.message or "",
                    policy_ids=then.policy_ids,
                )
            )
    now_ids = {v.step_id for v in after}
    for then in before:  # a refusal of the whole plan that the proposed rules drop
        if then.step_id not in now_ids and not then.allowed:
            out.append(
                StepChange(
                    step_id=then.step_id,
                    change="newly_allowed",
                    code=then.code or "",
                    reason=then.message or "",
                    policy_ids=then.policy_ids,
                )
            )
    return out


def what_if(
    runs: Iterable[RecordedPlan], proposal: Proposal, rules: RulesOfTheirTime, digest: str
) -> WhatIfReport:
    """Every run the proposal applies to, decided both ways; the changed ones reported."""
    read = skipped = evaluated = steps = refused = allowed = 0
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
        before = decide_plan(run.plan, pool, bound(then, run.submitted_by))
        after = decide_plan(run.plan, pool, bound(proposed, run.submitted_by))
        found = _changes(before, after)
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
        steps_now_refused=refused,
        steps_newly_allowed=allowed,
        runs=changed,
    )
