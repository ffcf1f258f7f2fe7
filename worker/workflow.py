"""The intent workflow: ``worker.flow`` run live, every port a durable DBOS
step, message wait or durable sleep.

The run id is the workflow id. A fork (``DBOS.fork_workflow``) runs its
parent's job under a new workflow id: DBOS serves the parent's recorded
planner and tool calls before the fork point, and from there on every call
and record is the fork's own.
"""

from __future__ import annotations

from dbos import DBOS

from contracts import (
    APPROVAL_TOPIC,
    INTENT_WORKFLOW,
    RESOLUTION_TOPIC,
    Decision,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    Mode,
    PolicyProfile,
    RunStatus,
    ToolPool,
)
from ledger import runs, storage_full
from worker import cancel as _cancel
from worker import explain as _explain  # registers the explain workflow with DBOS
from worker import records as rec
from worker import replay as _replay  # registers the replay workflow with DBOS
from worker._crash import RUN, maybe_crash
from worker._runtime import runtime
from worker._storage import stranded
from worker._tracing import annotate
from worker.flow import BeginResult, GateResult, RunEnd, StepRecord, run_intent
from worker.opa import pack_output
from worker.steps_calls import planner_call, tool_call

__all__ = ["LivePorts", "intent_workflow"]

_ = (_explain, _replay)

# How long one wait for an operator's resolution lasts before the row is re-read.
_RESOLUTION_RECHECK_S = 60.0


class LivePorts:
    """The flow's ports as DBOS steps (see ``worker.flow.Ports``).

    Some steps answer more than their port asks, in the same commit: ``begin``
    checks the ``@compile`` boundary for a cancel, and the approval wait's step
    records the decision, checks its boundary and verifies the approved plan.
    Those answers are held here and given to the port that asks next
    (``cancelled``, ``verify_plan``) instead of a step of its own. They come
    from checkpointed steps, so a recovered workflow is given the same."""

    def __init__(self) -> None:
        self._cancel_seen: dict[str, JsonObject | None] = {}
        self._verified: dict[str, GateResult] = {}

    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult:
        begun, cancelled = rec.begin_run(run_id, profile_id, tool_pool_id, _cancel.COMPILE)
        self._cancel_seen[_cancel.COMPILE] = cancelled
        return begun

    def planner_call(self, raw: JsonObject) -> JsonObject:
        return planner_call(raw)

    def gate_and_card(
        self,
        run_id: str,
        raw_plan: JsonObject,
        profile: PolicyProfile,
        pool: ToolPool,
        mode: Mode,
        *,
        revise: JsonObject | None = None,
        repaired: bool = False,
        budgets: JsonObject | None = None,
    ) -> GateResult:
        return rec.gate_and_card(
            run_id, raw_plan, profile, pool, mode, revise=revise, repaired=repaired, budgets=budgets
        )

    def await_decision(
        self, run_id: str, plan_digest: str, profile: PolicyProfile, at: str
    ) -> tuple[bool, str] | None:
        crash = runtime().settings.crash_point
        waited = 0.0
        taken = rec.take_decision(run_id, plan_digest, at)
        while taken["decision"] is None and taken["cancelled"] is None:
            maybe_crash(crash, "approval_wait", RUN)
            if waited >= profile.approval.timeout_s:
                rec.expire_plan_card(run_id)
                return None
            chunk = min(profile.approval.recheck_s, profile.approval.timeout_s - waited)
            if DBOS.recv(APPROVAL_TOPIC, timeout_seconds=chunk) is None:
                waited += chunk
            taken = rec.take_decision(run_id, plan_digest, at)
        cancelled = taken["cancelled"]
        self._cancel_seen[at] = cancelled if isinstance(cancelled, dict) else None
        verified = taken["verified"]
        if isinstance(verified, dict):
            self._verified[plan_digest] = GateResult.model_validate(verified)
        if taken["decision"] is None:
            return None  # woken by a cancel: the flow ends the run next
        maybe_crash(crash, "after_approval", RUN)
        return taken["decision"] == Decision.APPROVED.value, str(taken["decided_by"])

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        found = rec.read_message(run_id, turn)
        if found is None:
            rec.wait_for_input(run_id)
        waited = 0.0
        while found is None:
            if waited >= profile.approval.timeout_s:
                return None  # nobody wrote: the session is over
            chunk = min(profile.approval.recheck_s, profile.approval.timeout_s - waited)
            if DBOS.recv(APPROVAL_TOPIC, timeout_seconds=chunk) is None:
                waited += chunk
            elif _cancel.check(run_id, f"@input-{turn}") is not None:
                return None  # woken by a cancel: the flow ends the run next
            found = rec.read_message(run_id, turn)
        rec.took_message(run_id)
        return found

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult:
        held = self._verified.pop(plan_digest, None)
        return held if held is not None else rec.verify_plan(run_id, plan_digest)

    def tool_call(self, raw: JsonObject) -> JsonObject:
        return tool_call(raw)

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        if at in self._cancel_seen:  # answered with the step before, in its commit
            return self._cancel_seen.pop(at)
        return _cancel.check(run_id, at)

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        rec.needs_operator(run_id, op_key, step_id)
        resolved = rec.read_resolution(op_key)
        while resolved is None:
            DBOS.recv(RESOLUTION_TOPIC, timeout_seconds=_RESOLUTION_RECHECK_S)
            resolved = rec.read_resolution(op_key)
        rec.resume_after_resolution(run_id)
        return resolved

    def pause(self, seconds: float) -> None:
        DBOS.sleep(seconds)

    def record_step_result(self, record: StepRecord) -> JsonObject:
        return rec.record_step_result(record)

    def finish(self, end: RunEnd) -> None:
        if end.opa is not None:  # before the run is terminal: a client then finds it packed
            pack_output(
                {
                    "run_id": end.run_id,
                    "status": end.status.value,
                    "error_code": end.error_code,
                    "steps": list(end.steps),
                    "opa": end.opa.model_dump(mode="json"),
                    "follow_ups": end.follow_ups or [],
                }
            )
        if rec.finish_run(end) is RunStatus.CANCELLED:
            _cancel.end_workflow()  # after the run's row is terminal: DBOS agrees


@DBOS.workflow(name=INTENT_WORKFLOW)
def intent_workflow(raw_job: JsonObject) -> JsonObject:
    job = IntentJob.model_validate(raw_job)
    run_id = DBOS.workflow_id or job.run_id
    annotate(run_id=run_id)
    if run_id != job.run_id:
        _registered_fork(run_id)
    try:
        return run_intent(job, run_id, LivePorts())
    except Exception as exc:
        if storage_full(exc):
            stranded(run_id)  # resumed from its checkpoints once space is freed
        raise


def _registered_fork(workflow_id: str) -> None:
    """A workflow running another run's job is a fork; Gatehouse's own forks
    (``gatehouse fork``) write their run first. One made behind Gatehouse's back
    (``dbos workflow fork``) has no run: no approval, ledger or evidence would
    hold what it did, so it ends in DBOS ``ERROR`` before doing anything.
    Not a step: a run row, once written, is never deleted, so every execution
    reads the same answer."""
    with runtime().db.engine.connect() as conn:
        known = runs.run_status(conn, workflow_id) is not None
    if not known:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FOUND,
            f"workflow {workflow_id} has no Gatehouse run: a fork made through DBOS is"
            " refused; fork with `gatehouse runs fork RUN_ID --from-step N`",
        )
