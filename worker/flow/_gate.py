"""The gate's decision on a proposed plan, made once, in the flow: its contract and the
gate (``policies.repair.gated_plan``), its digest, a revision held to the steps that
already ran (``policies.repair.check_revision``), and whether the profile approves it
itself (``auto_read_only``). Every port only writes what this decided: the live one
the plan card, a replay and the tests' fakes nothing. Pure: no I/O.
"""

from __future__ import annotations

from contracts import GatehouseError, JsonObject, Mode, PolicyProfile, ToolPool, digest_of
from policies.gate import read_only
from policies.repair import check_revision, gated_plan
from worker.flow._results import PlanGated

__all__ = ["gate_plan"]


def gate_plan(
    run_id: str,
    raw_plan: JsonObject,
    gate: tuple[PolicyProfile, ToolPool, Mode],
    *,
    revise: JsonObject | None = None,
    repaired: bool = False,
    budgets: JsonObject | None = None,
) -> PlanGated:
    """``raw_plan`` gated under ``gate`` (profile, tool pool, mode). ``revise`` (a new
    revision): the previous plan and digest, how many steps it keeps, which step ids
    ran, and ``outside_data`` when it writes in the value a step takes; ``repaired``:
    the plan came from a repair call; ``budgets``: used / limit so far."""
    profile, pool, mode = gate
    facts = PlanGated(
        run_id=run_id,
        mode=mode,
        profile_id=profile.profile_id,
        tool_pool_id=pool.tool_pool_id,
        repaired=repaired,
        budgets=budgets,
        previous_digest=None if revise is None else str(revise.get("previous_digest")),
        outside_data=None if revise is None else (str(revise.get("outside_data") or "") or None),
    )
    try:
        plan = gated_plan(raw_plan, profile, pool)
        digest = digest_of(plan.model_dump(mode="json"))
        changes = None if revise is None else check_revision(plan, digest, revise)
    except GatehouseError as exc:
        return facts.model_copy(
            update={
                "error_code": exc.code.value,
                "error_message": exc.message,
                "error_details": exc.details,
            }
        )
    # the profile approves plans that cannot change anything, under its own name
    approved_by = None
    if mode is not Mode.PLAN_ONLY and profile.approval.mode == "auto_read_only" and read_only(plan):
        approved_by = f"policy:{profile.profile_id}"
    return facts.model_copy(
        update={
            "plan": plan,
            "plan_digest": digest,
            "changes": changes,
            "approved_by": approved_by,
        }
    )
