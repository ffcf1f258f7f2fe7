"""Recording a finished step: its output checked, its row, its episodes."""

from __future__ import annotations

from contracts import (
    DataRef,
    DriverKind,
    ErrorCode,
    JsonObject,
    JsonValue,
)
from ledger import Conn, evidence, now_iso, runs
from policies import catalog
from policies.episodes import episode, security_episode
from policies.executor_evidence import executor_episodes
from policies.kinds import rules_of
from policies.security import classify
from worker.flow import StepRecord
from worker.runtime import WorkerSettings

__all__ = ["record_step", "step_verdict", "write_step"]


def record_step(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """A finished step's record, as a record's transaction runs it (``write_step``)."""
    return write_step(s, StepRecord.of_json(arg), me.executor_id)


def write_step(s: Conn, record: StepRecord, executor_id: str) -> JsonObject:
    """A finished step's row, episodes and budgets, with the caller's transaction;
    its final ok / error_code / error_message (output checked). Idempotent: run
    again, it writes nothing new. The one writer of a step's record: with its call's
    completion (``worker.calls``) or, for a step settled later, in a record of its own."""
    run_id, step_id, outcome = record.run_id, record.step_id, record.outcome
    ok, output, code, message = step_verdict(step_id, outcome, record.output_schema_ref)
    op = outcome.get("op_key")
    refused = _security_code(code)
    if refused is not None:
        # A refusal at run time (a destination that resolved to a private address,
        # a command refused by the handler, output off its contract, a call in
        # doubt, a corrupt ledger row) is a security event like one at the gate.
        evidence.put_episode(
            s,
            run_id,
            step_id,
            security_episode(
                run_id=run_id,
                subject=f"step:{step_id}",
                code=refused,
                message=str(message or refused.value),
                executor_id=executor_id,
                recorded_at=now_iso(),
                details={"step_id": step_id, "refusal": output},
            ),
        )
    raw_output = outcome.get("output")
    agent = rules_of(DriverKind(record.driver_kind)).agent_turn
    if agent and isinstance(raw_output, dict):
        for item in executor_episodes(
            run_id=run_id,
            step_id=step_id,
            op_key=op if isinstance(op, str) else None,
            output=raw_output,
            executor_id=executor_id,
            recorded_at=now_iso(),
        ):
            evidence.put_episode(s, run_id, step_id, item)
    status = "succeeded" if ok else "failed"
    if record.budgets is not None:
        runs.set_budgets(s, run_id, record.budgets)
    runs.record_step(
        s,
        run_id=run_id,
        step_id=step_id,
        position=record.position,
        driver_kind=record.driver_kind,
        connector_id=record.connector_id,
        status=status,
        op_key=op if isinstance(op, str) else None,
        output=output if isinstance(output, dict) else None,
        error_code=code if isinstance(code, str) else None,
        error_message=message if isinstance(message, str) else None,
    )
    arts = outcome.get("artifacts")
    refs = [
        DataRef(data_type="artifact", data_id=str(a.get("name")), sha256=str(a.get("sha256")))
        for a in (arts if isinstance(arts, list) else [])
        if isinstance(a, dict)
    ]
    evidence.put_episode(
        s,
        run_id,
        step_id,
        episode(
            run_id=run_id,
            kind="step",
            subject=step_id,
            episode_type=f"execution/{record.driver_kind}",
            status="completed" if ok else "failed",
            summary=f"step {step_id} {status}" + (f": {code}" if code else ""),
            executor_id=executor_id,
            recorded_at=now_iso(),
            details={
                "step_id": step_id,
                "op_key": op if isinstance(op, str) else None,
                "connector_id": record.connector_id,
                "error_code": code,
            },
            outputs=refs,
        ),
    )
    return {"ok": ok, "error_code": code, "error_message": message}


def step_verdict(
    step_id: str, outcome: JsonObject, output_schema_ref: str | None
) -> tuple[bool, JsonValue, JsonValue, JsonValue]:
    """(ok, output, error_code, error_message) of a finished call, output checked."""
    ok = bool(outcome.get("ok"))
    output = outcome.get("output")
    code = outcome.get("error_code")
    message = outcome.get("error_message")
    ref = output_schema_ref
    if ok and ref is not None:
        # Step output is a boundary too: it must match what the plan declared.
        problems = catalog.output_problems(ref, output if isinstance(output, dict) else {})
        if problems:
            ok, code = False, ErrorCode.OUTPUT_INVALID.value
            message = f"the output of step {step_id!r} does not match {ref}: {problems[0]}"
            output = {"output_schema_ref": ref, "problems": list[JsonValue](problems)}
    return ok, output, code, message


def _security_code(code: JsonValue) -> ErrorCode | None:
    """The code if it is a refusal worth a security episode (not a plain failure)."""
    try:
        parsed = ErrorCode(str(code))
    except ValueError:
        return None
    return None if classify(parsed)[0] == "other" else parsed
