"""Each record of a run (``worker.records``) under its durable name, run by ``tx``.

Every record is one transaction of ours holding its rows and its checkpoint
(``worker.durable._tx``): an execution run again answers from the checkpoint and
writes nothing; none is a DBOS step since gatehouse-6.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dbos import DBOS

from contracts import Continuation, JsonObject, RunStatus, Step
from ledger import Conn, stretches
from worker import records
from worker.durable._tx import tx
from worker.flow import BeginResult, GateResult, PlanGated, RunEnd, StepRecord
from worker.runtime import WorkerSettings

__all__ = [
    "Wait",
    "begin_run",
    "cancel_check",
    "decision_or_park",
    "expire_plan_card",
    "finish_run",
    "gate_and_card",
    "message_or_park",
    "needs_operator",
    "read_message",
    "read_resolution",
    "record_step_result",
    "resolution_or_park",
    "resume_after_resolution",
    "take_decision",
    "took_message",
    "verify_plan",
    "wait_for_input",
]


def begin_run(
    run_id: str, policy_profile: str, tool_pool: str, at: str
) -> tuple[BeginResult, JsonObject | None]:
    """The run begun, and the cancel seen at boundary ``at`` (None: go on)."""
    out = tx(
        Step.BEGIN,
        records.begin,
        {"run_id": run_id, "policy_profile": policy_profile, "tool_pool": tool_pool, "at": at},
    )
    cancelled = out.get("cancelled")
    return (
        BeginResult.model_validate(out.get("begun")),
        cancelled if isinstance(cancelled, dict) else None,
    )


def gate_and_card(gated: PlanGated) -> GateResult:
    """What the gate decided, written: the plan card, or the refusal's security episode."""
    out = tx(Step.GATE, records.gate, gated.model_dump(mode="json"))
    return GateResult.model_validate(out)


def verify_plan(run_id: str, plan_digest: str) -> GateResult:
    """Right before the first step: the stored plan must still be the approved one."""
    out = tx(Step.VERIFY_PLAN, records.plan_check, {"run_id": run_id, "plan_digest": plan_digest})
    return GateResult.model_validate(out)


def take_decision(run_id: str, plan_digest: str, at: str) -> JsonObject:
    """``{decision, decided_by, cancelled, verified}`` (see ``records.take_decision``)."""
    return tx(
        Step.TAKE_DECISION,
        records.take_decision,
        {"run_id": run_id, "plan_digest": plan_digest, "at": at},
    )


def expire_plan_card(run_id: str) -> None:
    tx(Step.EXPIRE_PLAN_CARD, records.expire_plan_card, {"run_id": run_id})


def needs_operator(run_id: str, op_key: str, step_id: str) -> None:
    tx(
        Step.NEEDS_OPERATOR,
        records.needs_operator,
        {"run_id": run_id, "op_key": op_key, "step_id": step_id},
    )


def read_resolution(op_key: str) -> str | None:
    """applied / not_applied once an operator has said so; None while in doubt."""
    found = tx(Step.READ_RESOLUTION, records.read_resolution, {"op_key": op_key}).get("resolution")
    return found if isinstance(found, str) else None


def resume_after_resolution(run_id: str) -> None:
    tx(Step.RESUME, records.resume_after_resolution, {"run_id": run_id})


def record_step_result(record: StepRecord) -> JsonObject:
    """Record a finished step; its final ok/error_code (output checked)."""
    return tx(Step.RECORD_STEP, records.record_step, record.as_json())


def finish_run(end: RunEnd) -> RunStatus:
    """Record how the run ended; the status it ended with (a succeeded run that a
    cancel reached after its last step ends cancelled)."""
    out = tx(
        Step.FINISH,
        records.finish,
        {
            "run_id": end.run_id,
            "status": end.status.value,
            "steps": list(end.steps),
            "error_code": end.error_code,
            "error_message": end.error_message,
            "trace_digest": end.trace_digest,
            "budgets": end.budgets,
        },
    )
    return RunStatus(str(out["status"]))


def wait_for_input(run_id: str) -> None:
    tx(Step.WAIT_FOR_INPUT, records.wait_for_input, {"run_id": run_id})


def read_message(run_id: str, turn: int) -> JsonObject | None:
    found = tx(Step.READ_MESSAGE, records.read_message, {"run_id": run_id, "turn": turn}).get(
        "message"
    )
    return found if isinstance(found, dict) else None


def took_message(run_id: str) -> None:
    tx(Step.TOOK_MESSAGE, records.took_message, {"run_id": run_id})


def cancel_check(run_id: str, at: str) -> JsonObject | None:
    """{cancelled_by, reason, source} when the run stops at boundary ``at``; else None."""
    found = tx(Step.CANCEL_CHECK, records.check_boundary, {"run_id": run_id, "at": at}).get(
        "cancelled"
    )
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class Wait:
    """Which of the flow's waits a split run is at: its index (0 = the first),
    how long it may last (``timeout_s``, None: for ever) and, when a stretch
    resumes at it, the expiry set when the run first parked there."""

    index: int
    timeout_s: float | None
    until: str | None

    def arg(self) -> JsonObject:
        """The wait, and the stretch asking (``records.stale``): this workflow's,
        RUN_ID:N for stretch N, RUN_ID for the first."""
        return {
            "wait": self.index,
            "timeout_s": self.timeout_s,
            "until": self.until,
            "stretch": stretches.stretch_of(DBOS.workflow_id or ""),
        }


def decision_or_park(
    run_id: str, plan_digest: str, at: str, wait: Wait, then: Callable[[], Continuation]
) -> JsonObject:
    """``take_decision``'s answer, ``expired``, or ``parked`` with ``then()``, where the
    run goes on once decided, made only if it parks (``records.decision_or_park``)."""
    arg: JsonObject = {"run_id": run_id, "plan_digest": plan_digest, "at": at, **wait.arg()}

    def body(s: Conn, given: JsonObject, me: WorkerSettings) -> JsonObject:
        return records.decision_or_park(s, given, me, then=lambda: then().model_dump(mode="json"))

    return tx(Step.DECISION_OR_PARK, body, arg)


def message_or_park(run_id: str, turn: int, wait: Wait) -> JsonObject:
    arg: JsonObject = {"run_id": run_id, "turn": turn, **wait.arg()}
    return tx(Step.MESSAGE_OR_PARK, records.message_or_park, arg)


def resolution_or_park(run_id: str, op_key: str, step_id: str, wait: Wait) -> JsonObject:
    arg: JsonObject = {"run_id": run_id, "op_key": op_key, "step_id": step_id, **wait.arg()}
    return tx(Step.RESOLUTION_OR_PARK, records.resolution_or_park, arg)
