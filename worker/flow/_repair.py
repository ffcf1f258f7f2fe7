"""The plan-repair skill, as the flow uses it (the pure rules are in policies/repair.py).

Both repairs are ordinary planner calls through the ledger, each under its own
ledger step id (``@repair`` for a refused compile, ``@repair-N`` for the N-th
repaired remainder), so a replay serves them like any other call. The model
is told the refusal or the failure on the ``model_instruction`` channel.

Orchestration only: every effect is a port of the flow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlannerCall,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies.repair import gated_plan, problems_of
from worker.flow._budgets import Spent

if TYPE_CHECKING:
    from worker.flow._ports import Ports, Trace

__all__ = ["COMPILE_REPAIR_ID", "MAX_STEP_REPAIRS", "MODEL_PLANNERS", "Repairs"]

COMPILE_REPAIR_ID = "@repair"
# A run asks for at most this many repaired remainders; a step that fails
# after that ends the run as a fatal step would.
MAX_STEP_REPAIRS = 2
# The planners that can be asked again (a recipe template compiles a fixed plan).
MODEL_PLANNERS = frozenset({"openai_compat", "opencode"})


def _plan_of(result: JsonObject) -> JsonObject | None:
    output = result.get("output")
    plan = output.get("plan") if isinstance(output, dict) else None
    return plan if result.get("ok") and isinstance(plan, dict) else None


class Repairs:
    """The repair calls of one run."""

    def __init__(self, ports: Ports, trace: Trace, compile_call: PlannerCall, spent: Spent) -> None:
        self.ports = ports
        self.trace = trace
        self.compile_call = compile_call  # what the first planner call was asked
        self.spent = spent  # a repair is a model turn like any other
        self.asked = 0

    def _ask(self, call_id: str, repair: JsonObject) -> JsonObject:
        exceeded = self.spent.before(tool=False, model_turn=True)
        if exceeded is not None:  # not asked: it would cross a budget
            return {
                "ok": False,
                "op_key": None,
                "output": {},
                "error_code": ErrorCode.BUDGET_EXCEEDED.value,
                "error_message": exceeded.message,
            }
        result = self.ports.planner_call(
            self.compile_call.model_copy(update={"call_id": call_id, "repair": repair})
        )
        if result.get("op_key") is not None:  # refused before any call: nothing to trace
            self.trace.add(result)
            self.spent.add_call(result, tool=False)
        return result

    def compiled(
        self, raw_plan: JsonObject, planner: str, profile: PolicyProfile, pool: ToolPool
    ) -> tuple[JsonObject, bool]:
        """(plan to gate, whether a repair was asked for). A compiled plan that the
        gate would refuse gets exactly one repair call, told why; if that call
        brings no plan, the refused plan goes to the gate, which refuses it."""
        if planner not in MODEL_PLANNERS:
            return raw_plan, False
        try:
            gated_plan(raw_plan, profile, pool)
        except GatehouseError as refusal:
            repair: JsonObject = {
                "reason": "refused",
                "plan": raw_plan,
                "problems": list[JsonValue](problems_of(refusal)),
            }
            repaired = _plan_of(self._ask(COMPILE_REPAIR_ID, repair))
            return (repaired if repaired is not None else raw_plan), True
        return raw_plan, False

    def remainder(
        self, plan: Plan, position: int, step: PlanStep, final: JsonObject
    ) -> tuple[JsonObject | None, str | None, str]:
        """Ask for the plan again after ``step`` (at ``position``) soft-failed:
        (repaired plan or None, error code, message)."""
        if self.asked >= MAX_STEP_REPAIRS:
            return None, None, f"the run already asked for {MAX_STEP_REPAIRS} repairs"
        self.asked += 1
        code = final.get("error_code")
        message = str(final.get("error_message") or "")[:300]
        repair: JsonObject = {
            "reason": "step_failed",
            "plan": plan.model_dump(mode="json"),
            "done": [s.step_id for s in plan.steps[:position]],
            "failed": {"step_id": step.step_id, "error_code": code, "error_message": message},
            "rule": "keep the done steps unchanged and first; give every new step a new step_id",
        }
        result = self._ask(f"{COMPILE_REPAIR_ID}-{self.asked}", repair)
        repaired = _plan_of(result)
        if repaired is not None:
            return repaired, None, ""
        failed_code = result.get("error_code")
        return (
            None,
            failed_code if isinstance(failed_code, str) else ErrorCode.PLANNER_FAILED.value,
            str(result.get("error_message") or "the planner gave no repaired plan"),
        )
