"""A plan step's tool call, one attempt of it, ready for the ledger.

``prepare_tool`` builds the call's execution envelope (the ledger's request),
what delivers it to the step's handler in the run's workspace, the cancel
check at the step's boundary (in the claim's transaction) and the step's
record (in the completion's). The live worker sends it through the ledger; a
replay builds the same envelope and reads the recorded answer.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from contracts import (
    ErrorCode,
    JsonObject,
    StepRecordSpec,
    ToolCall,
)
from contracts.execution import ExecutionEnvelope
from ledger import calls, cancels
from policies.kinds import rules_of
from worker.calls._ledger import Call, Performed, Prepared
from worker.coordinator import Delivered, build_envelope, check, deliver, handlers
from worker.flow import CallOutcome, Spent, StepRecord
from worker.handlers import HandlerContext
from worker.handlers import opencode as opencode_handler
from worker.opa import unpack
from worker.records import observed_cancel, write_step
from worker.runtime import WorkerSettings, runtime, wait_for_space

__all__ = [
    "StepRecordSpec",
    "ToolCall",
    "outcome_of",
    "performed_of",
    "prepare_tool",
    "settles_step",
]

# Codes after which the flow may call again (or wait for a person): such a
# result does not settle its step at once, so its record is written later.
_NOT_FINAL = frozenset(
    {
        ErrorCode.UPSTREAM_UNAVAILABLE.value,
        ErrorCode.CALL_IN_DOUBT.value,
        ErrorCode.TURN_INTERRUPTED.value,
        ErrorCode.OC_STALLED.value,
    }
)


def settles_step(spec: ToolCall, result: JsonObject) -> bool:
    """Whether this call's result is its step's outcome, recorded with the call."""
    return spec.record is not None and result.get("error_code") not in _NOT_FINAL


def cancelled_by(run_id: str) -> str | None:
    """Who cancelled the run, if someone has (``HandlerContext.cancelled_by``): asked by
    a handler while its step runs, so a cancel can stop a long turn in flight. None
    when nobody has, or the database is away (the step's boundary sees the cancel)."""
    try:
        with runtime().db.engine.connect() as conn:
            found = cancels.get(conn, run_id)
    except SQLAlchemyError:
        return None
    return None if found is None else found.requested_by


def prepare_tool(spec: ToolCall, settings: WorkerSettings) -> Prepared:
    """The call of one attempt of one plan step: its envelope is the ledger's request."""
    key = calls.op_key(spec.run_id, spec.step_id, spec.attempt)
    rules = rules_of(spec.driver_kind)
    envelope = build_envelope(
        run_id=spec.run_id,
        step_id=spec.step_id,
        op_key=key,
        attempt=spec.attempt,
        connector=spec.connector,
        arguments=spec.input,
        executor_policy=spec.executor_policy,
        narrowed=spec.narrowed,
        allowance=spec.allowance,
        opa=spec.opa,
        unsandboxed_shell=spec.unsandboxed_shell,
        unsandboxed_opencode=spec.unsandboxed_opencode,
    )

    def delivered() -> ExecutionEnvelope:
        workspace = settings.workspace_root / spec.run_id

        def prepare() -> None:
            workspace.mkdir(parents=True, exist_ok=True)
            if spec.opa is not None:  # the archive, in the workspace before the step runs
                unpack(settings, workspace, spec.opa)

        # Before the handler runs, nothing has taken effect: a full disk is waited out.
        wait_for_space(f"workspace of {spec.run_id}", prepare)
        return envelope.bound(workspace)

    context = HandlerContext(settings, cancelled_by)

    def reconcile(_key: str) -> Performed | None:
        settled = opencode_handler.reconcile_turn(delivered(), context)
        return None if settled is None else performed_of(check(delivered(), settled))

    def perform(_key: str) -> Performed:
        return performed_of(deliver(delivered(), handlers(), context))

    def boundary(conn: Connection, looked: calls.Look) -> JsonObject | None:
        at = spec.boundary or ""
        found = observed_cancel(conn, looked.cancel, at, settings.executor_id)
        return None if found is None else {"cancelled": found, "at": at}

    def settle(conn: Connection, result: JsonObject) -> JsonObject:
        record = spec.record
        if record is None or not settles_step(spec, result):
            return {}
        step = StepRecord(
            run_id=spec.run_id,
            step_id=spec.step_id,
            position=spec.position,
            driver_kind=spec.driver_kind.value,
            connector_id=record.connector_id,
            outcome=result,
            output_schema_ref=record.output_schema_ref,
            budgets=Spent.from_state(record.spent).view_after(result),
        )
        return {"recorded": write_step(conn, step, settings.executor_id)}

    return Prepared(
        Call(
            run_id=spec.run_id,
            step_id=spec.step_id,
            attempt=spec.attempt,
            kind="tool",
            target=spec.driver_kind.value,
            request=envelope.model_dump(mode="json"),
            # may an interrupted call be sent again with the same key? (its kind says)
            idempotent=rules.may_resend(spec.connector, spec.input),
            reconcile=reconcile if rules.agent_turn else None,
            boundary=None if spec.boundary is None else boundary,
            settle=None if spec.record is None else settle,
        ),
        perform,
    )


def outcome_of(answer: JsonObject) -> CallOutcome:
    """The ledger's answer for one attempt as the flow's tool port gives it: the stop
    its boundary answered (``{"cancelled": …, "at": …}``, nothing claimed) is the
    outcome's cancel; anything else is the call's result."""
    found = answer.get("cancelled")
    return CallOutcome.stopped(found) if isinstance(found, dict) else CallOutcome(answer)


def performed_of(delivered: Delivered) -> Performed:
    """What the ledger records of a delivered result: its output and artifacts as
    for every call, and the rest of the result (envelope id, status, error,
    metrics) under ``result``."""
    result = delivered.result
    return Performed(
        ok=delivered.ok,
        output=result.output,
        error_code=delivered.error_code,
        error_message=delivered.error_message,
        artifacts=delivered.artifacts,
        result=result.model_dump(
            mode="json", include={"envelope_id", "status", "error", "metrics"}
        ),
    )
