"""Plan repair, the pure part: what is wrong with a plan, and what a repair changed.

Two moments ask a model planner for a repaired plan (``worker/flow/``):

* a compiled plan fails its schema or the gate: exactly one repair call, told
  the refusal; a repaired plan that still fails is refused for good;
* a step soft-fails with ``on_error: repair``: the planner is told which
  steps are done and how the step failed, and answers with the whole plan —
  the steps already done unchanged, then a new remainder. That plan has a new
  digest and waits for a new approval; approvers are shown ``plan_changes``.
"""

from __future__ import annotations

from pydantic import ValidationError

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PolicyProfile,
    ToolPool,
    validate_instance,
)
from policies.gate import gate_plan

__all__ = ["check_revision", "gated_plan", "kept_prefix", "plan_changes", "problems_of"]


def gated_plan(raw_plan: JsonValue, profile: PolicyProfile, pool: ToolPool) -> Plan:
    """The plan, if it passes its contract and the gate; raises the refusal otherwise."""
    validate_instance("env.mova_agent_plan_v1", raw_plan, ErrorCode.PLAN_INVALID)
    try:
        plan = Plan.model_validate(raw_plan)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            "the plan breaks a rule of its contract",
            {"problem": str(exc)[:1000]},
        ) from exc
    gate_plan(plan, pool, profile)
    return plan


def problems_of(refusal: GatehouseError) -> list[str]:
    """A refusal as lines a planner can act on (channel ``model_instruction``)."""
    lines = [f"{refusal.code.value}: {refusal.message}"]
    errors = refusal.details.get("errors")
    for item in errors if isinstance(errors, list) else []:
        if isinstance(item, dict):
            lines.append(f"at {item.get('path')}: {item.get('problem')}")
    problem = refusal.details.get("problem")
    if isinstance(problem, str):
        lines.append(problem)
    return [line[:500] for line in lines[:21]]


def kept_prefix(approved: Plan, repaired: Plan, done: int) -> str | None:
    """Why ``repaired`` does not keep the first ``done`` steps of ``approved`` as they
    were, or None when it does and goes on past them."""
    if len(repaired.steps) <= done:
        return f"the repaired plan has {len(repaired.steps)} step(s); {done} were already done"
    for before, after in zip(approved.steps[:done], repaired.steps[:done], strict=True):
        if before != after:
            return f"the repaired plan changes step {before.step_id!r}, which already ran"
    return None


def plan_changes(approved: Plan, repaired: Plan) -> list[JsonValue]:
    """What a repair changed, step by step, for the approver's eyes."""
    old = {s.step_id: s.model_dump(mode="json") for s in approved.steps}
    new = {s.step_id: s.model_dump(mode="json") for s in repaired.steps}
    changes: list[JsonValue] = []
    for step_id, step in new.items():
        if step_id not in old:
            changes.append({"change": "added", "step_id": step_id, "step": step})
        elif old[step_id] != step:
            changes.append(
                {"change": "changed", "step_id": step_id, "before": old[step_id], "after": step}
            )
    for step_id, step in old.items():
        if step_id not in new:
            changes.append({"change": "removed", "step_id": step_id, "step": step})
    if approved.objective != repaired.objective:
        objective: JsonObject = {
            "change": "objective",
            "before": approved.objective,
            "after": repaired.objective,
        }
        changes.append(objective)
    return changes


def check_revision(plan: Plan, digest: str, revise: JsonObject) -> list[JsonValue]:
    """Hold a repaired remainder to the rules; return its changes for the approver.

    ``revise`` (from the flow): ``previous`` (the approved plan), ``previous_digest``,
    ``keep`` (how many steps are done), ``ran`` (the step ids that ran, the failed
    one included: a new step may not take their ids, or it would meet their
    ledger entries).
    """
    previous = Plan.model_validate(revise["previous"])
    keep = revise.get("keep")
    ran = revise.get("ran")
    done = keep if isinstance(keep, int) else 0
    taken = {str(r) for r in ran} if isinstance(ran, list) else set()
    problem = kept_prefix(previous, plan, done)
    if problem is None and digest == revise.get("previous_digest"):
        problem = "the repaired plan is the plan that failed"
    if problem is None:
        reused = [s.step_id for s in plan.steps[done:] if s.step_id in taken]
        if reused:
            problem = f"the repaired remainder reuses the step id {reused[0]!r} of a step that ran"
    if problem is not None:
        raise GatehouseError(ErrorCode.REPAIR_REFUSED, problem, {"plan_digest": digest})
    return plan_changes(previous, plan)
