"""The intent workflow: compile → gate → plan card → wait → execute → evidence.

Orchestration only. No clock, randomness, network or file access here:
every such thing happens in a step (``steps_calls``, ``steps_records``), so
a recovered workflow replays to the same point and continues.
"""

from __future__ import annotations

from dbos import DBOS

from contracts import (
    APPROVAL_TOPIC,
    INTENT_WORKFLOW,
    Decision,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    JsonValue,
    Mode,
    OnError,
    RunStatus,
)
from policies.gate import check_step
from worker import steps_records as rec
from worker._inputs import resolve_input
from worker.steps_calls import planner_call, tool_call

__all__ = ["intent_workflow"]


@DBOS.workflow(name=INTENT_WORKFLOW)
def intent_workflow(raw_job: JsonObject) -> JsonObject:
    job = IntentJob.model_validate(raw_job)
    req, run_id = job.request, job.run_id

    begun = rec.begin_run(run_id, req.policy_profile, req.tool_pool)
    if not begun.ok or begun.profile is None or begun.tool_pool is None:
        return _end(run_id, RunStatus.FAILED, [], begun.error_code, begun.error_message)
    profile, pool = begun.profile, begun.tool_pool

    # 1 compile: a supplied plan (run-plan) or the planner's, through the ledger
    if req.plan is not None:
        raw_plan: JsonObject = req.plan.model_dump(mode="json")
    else:
        compiled = planner_call(
            {
                "run_id": run_id,
                "recipe_id": req.recipe,
                "objective": req.objective,
                "parameters": req.parameters,
                "profile": profile.model_dump(mode="json"),
                "tool_pool": pool.model_dump(mode="json"),
            }
        )
        output = compiled.get("output")
        plan_value = output.get("plan") if isinstance(output, dict) else None
        if not compiled.get("ok") or not isinstance(plan_value, dict):
            code = str(compiled.get("error_code") or ErrorCode.PLANNER_FAILED.value)
            message = str(compiled.get("error_message") or "")
            return _end(run_id, RunStatus.FAILED, [], code, message)
        raw_plan = plan_value

    # 2 gate + 3 plan card
    gated = rec.gate_and_card(run_id, raw_plan, profile, pool, req.mode)
    if not gated.ok or gated.plan is None or gated.plan_digest is None:
        return _end(run_id, RunStatus.FAILED, [], gated.error_code, gated.error_message)
    plan, digest = gated.plan, gated.plan_digest
    if req.mode is Mode.PLAN_ONLY:
        return _end(run_id, RunStatus.PLANNED, [])

    # 4 durable wait: the plan_approvals row decides; a message only wakes us early
    waited = 0.0
    decided = rec.read_decision(run_id, digest)
    while decided is None:
        if waited >= profile.approval.timeout_s:
            rec.expire_plan_card(run_id)
            message = f"no decision on plan {digest[:12]} within {waited:.0f} s"
            return _end(run_id, RunStatus.FAILED, [], ErrorCode.APPROVAL_TIMEOUT.value, message)
        chunk = min(profile.approval.recheck_s, profile.approval.timeout_s - waited)
        message = DBOS.recv(APPROVAL_TOPIC, timeout_seconds=chunk)
        if message is None:
            waited += chunk
        decided = rec.read_decision(run_id, digest)
    decision, decided_by = decided
    rec.record_decision(run_id, digest, decision, decided_by)
    if decision is Decision.REJECTED:
        return _end(run_id, RunStatus.REJECTED, [])
    verified = rec.verify_plan(run_id, digest)
    if not verified.ok:  # the stored plan was changed after approval: run nothing
        return _end(run_id, RunStatus.FAILED, [], verified.error_code, verified.error_message)

    # 5 execute, in order, each step re-checked against the policy right before it runs
    outputs: dict[str, JsonObject] = {}
    summary: list[JsonValue] = []
    for position, step in enumerate(plan.steps):
        try:
            step_input = resolve_input(step, outputs)
            connector = check_step(step, step_input, pool, profile)
        except GatehouseError as exc:
            rec.record_step_result(
                run_id=run_id,
                step_id=step.step_id,
                position=position,
                driver_kind=step.driver_kind.value,
                connector_id=step.connector_id,
                outcome={
                    "ok": False,
                    "output": exc.details,
                    "error_code": exc.code.value,
                    "error_message": exc.message,
                    "op_key": None,
                    "artifacts": [],
                },
            )
            summary.append({"step_id": step.step_id, "ok": False, "error_code": exc.code.value})
            return _end(run_id, RunStatus.FAILED, summary, exc.code.value, exc.message)
        outcome = tool_call(
            {
                "run_id": run_id,
                "step_id": step.step_id,
                "attempt": 1,
                "driver_kind": step.driver_kind.value,
                "connector": connector.model_dump(mode="json"),
                "input": step_input,
            }
        )
        final = rec.record_step_result(
            run_id=run_id,
            step_id=step.step_id,
            position=position,
            driver_kind=step.driver_kind.value,
            connector_id=step.connector_id,
            outcome=outcome,
            output_schema_ref=step.output_schema_ref,
        )
        ok = bool(final.get("ok"))
        code_value = final.get("error_code")
        step_code = code_value if isinstance(code_value, str) else None
        summary.append({"step_id": step.step_id, "ok": ok, "error_code": step_code})
        out = outcome.get("output")
        if ok and isinstance(out, dict):
            outputs[step.step_id] = out
        if not ok and step.on_error is OnError.FATAL:
            return _end(
                run_id,
                RunStatus.FAILED,
                summary,
                step_code or ErrorCode.HANDLER_FAILED.value,
                str(final.get("error_message") or ""),
            )

    # 6 evidence: the summary episode and the terminal status, in one commit
    return _end(run_id, RunStatus.SUCCEEDED, summary)


def _end(
    run_id: str,
    status: RunStatus,
    summary: list[JsonValue],
    code: str | None = None,
    message: str | None = None,
) -> JsonObject:
    """Every way a run ends: terminal status and run-summary episode, in one commit."""
    rec.finish_run(run_id, status, summary, code, message)
    return {"run_id": run_id, "status": status.value, "error_code": code, "steps": summary}
