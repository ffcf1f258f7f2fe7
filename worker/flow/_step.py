"""What the flow hands its ports for one step: the call, its record, a refusal.

Pure: no I/O, no clock. ``worker.flow._run`` builds these between the gate's check
of a step and the call that runs it.
"""

from __future__ import annotations

from contracts import (
    Connector,
    DriverKind,
    GatehouseError,
    JsonObject,
    PlanStep,
    PolicyProfile,
    StepRecordSpec,
    ToolCall,
)
from contracts.opa_run import OpaJob
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
    opencode = step.driver_kind is DriverKind.OPENCODE
    # a stdio MCP server is a program too: the same sandbox rule holds
    shell = step.driver_kind in (DriverKind.RESTRICTED_SHELL, DriverKind.MCP_PROXY)
    return ToolCall(
        run_id=run_id,
        step_id=step.step_id,
        position=position,
        driver_kind=step.driver_kind,
        connector=connector,
        input=step_input,
        # its first attempt checks this boundary for a cancel before it is claimed
        boundary=step.step_id,
        executor_policy=profile.opencode if opencode else None,
        unsandboxed_opencode=(
            "allowed" if opencode and profile.unsandboxed_opencode == "allowed" else None
        ),
        unsandboxed_shell=("allowed" if shell and profile.unsandboxed_shell == "allowed" else None),
        # its record, written with its call (an OpenCode turn's is written after)
        record=None
        if opencode
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
