"""What the flow hands its ports for one step: the call, its record, a refusal.

Pure: no I/O, no clock. ``worker.flow._run`` builds these between the gate's check
of a step and the call that runs it.
"""

from __future__ import annotations

from contracts import (
    Connector,
    GatehouseError,
    JsonObject,
    PlanStep,
    PolicyProfile,
    StepRecordSpec,
    ToolCall,
)
from contracts.opa_run import OpaJob
from policies.kinds import rules_of
from worker.flow._budgets import Spent
from worker.flow._results import StepRecord

__all__ = ["refusal_outcome", "step_call", "step_record"]


def step_call(
    run_id: str,
    position: int,
    step: PlanStep,
    *,
    connector: Connector,
    step_input: JsonObject,
    profile: PolicyProfile,
    opa: OpaJob | None,
) -> ToolCall:
    """The tool call of the step at ``position``, as ``worker.flow._settle.settle`` sends
    it (each attempt sets its number). ``connector`` is the one the gate checked."""
    rules = rules_of(step.driver_kind)
    agent, program = rules.agent_turn, rules.runs_a_program
    return ToolCall(
        run_id=run_id,
        step_id=step.step_id,
        position=position,
        driver_kind=step.driver_kind,
        connector=connector,
        input=step_input,
        # its first attempt checks this boundary for a cancel before it is claimed
        boundary=step.step_id,
        executor_policy=profile.opencode if agent else None,
        unsandboxed_opencode=(
            "allowed" if agent and profile.unsandboxed_opencode == "allowed" else None
        ),
        unsandboxed_shell=(
            "allowed" if program and profile.unsandboxed_shell == "allowed" else None
        ),
        # its record, written with its call (an OpenCode turn's is written after)
        record=None
        if agent
        else StepRecordSpec(
            connector_id=step.connector_id, output_schema_ref=step.output_schema_ref
        ),
        opa=opa,
    )


def step_record(
    run_id: str, position: int, step: PlanStep, outcome: JsonObject, spent: Spent | None
) -> StepRecord:
    """The step's record: its outcome and, when the run keeps an account, the
    budgets as they stood after it."""
    return StepRecord(
        run_id=run_id,
        step_id=step.step_id,
        position=position,
        driver_kind=step.driver_kind.value,
        connector_id=step.connector_id,
        outcome=outcome,
        output_schema_ref=step.output_schema_ref,
        budgets=None if spent is None else spent.view_json(),
    )


def refusal_outcome(exc: GatehouseError) -> JsonObject:
    """The outcome of a step the policy refused right before it ran: nothing called."""
    return {
        "ok": False,
        "output": exc.details,
        "error_code": exc.code.value,
        "error_message": exc.message,
        "op_key": None,
        "artifacts": [],
    }
