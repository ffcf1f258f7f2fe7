"""Database steps of the intent workflow: DBOS datasource transactions.

Each writes its rows and the workflow's checkpoint in one commit, so a
crash either keeps both or neither: nothing here can happen twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dbos._datasource import DatasourceOptions
from pydantic import ValidationError
from sqlalchemy.orm import Session

from contracts import (
    DataRef,
    Decision,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Mode,
    Plan,
    PolicyProfile,
    RunStatus,
    ToolPool,
    digest_of,
    validate_instance,
)
from contracts._base import Closed
from contracts.episode import ResultStatus
from ledger import Conn, calls, evidence, now_iso, runs
from policies import catalog
from policies.episodes import episode, security_episode
from policies.executor_evidence import executor_episodes
from policies.gate import gate_plan, read_only
from policies.security import classify
from worker._runtime import runtime
from worker._seed import fresh_seed

__all__ = [
    "BeginResult",
    "GateResult",
    "RunEnd",
    "StepRecord",
    "begin_run",
    "finish_run",
    "gate_and_card",
    "gated_plan",
    "needs_operator",
    "plan_problem",
    "read_decision",
    "read_resolution",
    "record_decision",
    "record_step_result",
    "resume_after_resolution",
    "step_verdict",
]


def _tx(name: str, fn: Callable[[JsonObject], JsonObject], arg: JsonObject) -> JsonObject:
    rt = runtime()
    # Each transaction touches one run's rows; READ COMMITTED avoids needless
    # serialization retries on PostgreSQL. SQLite serializes writers anyway.
    options: DatasourceOptions = {
        "name": name,
        "isolation_level": "SERIALIZABLE" if rt.db.is_sqlite else "READ COMMITTED",
    }
    return rt.ds.run_tx_step(options, fn, arg)


def _session() -> Session:
    return runtime().ds.sql_session()


def _exec_id() -> str:
    return runtime().settings.executor_id


# ---------------------------------------------------------------- begin
class BeginResult(Closed):
    ok: bool
    profile: PolicyProfile | None = None
    profile_digest: str | None = None
    tool_pool: ToolPool | None = None
    tool_pool_digest: str | None = None
    seed: str | None = None
    error_code: str | None = None
    error_message: str | None = None


def _begin(arg: JsonObject) -> JsonObject:
    run_id = str(arg["run_id"])
    s = _session()
    # The run's seed is chosen once, here, and recorded with this step: a
    # re-executed or replayed run draws the same choices from it.
    seed = runtime().settings.random_seed or fresh_seed()
    runs.set_seed(s, run_id, seed)
    try:
        prof = catalog.profile(str(arg["policy_profile"]))
        pool = catalog.tool_pool(str(arg["tool_pool"]))
    except GatehouseError as exc:
        return BeginResult(
            ok=False, seed=seed, error_code=exc.code.value, error_message=exc.message
        ).model_dump(mode="json")
    runs.set_status(s, run_id, RunStatus.RUNNING, "compile")
    runs.set_policy_digests(s, run_id, prof.digest, pool.digest)
    return BeginResult(
        ok=True,
        profile=prof.model,
        profile_digest=prof.digest,
        tool_pool=pool.model,
        tool_pool_digest=pool.digest,
        seed=seed,
    ).model_dump(mode="json")


def begin_run(run_id: str, policy_profile: str, tool_pool: str) -> BeginResult:
    out = _tx(
        "gatehouse.begin",
        _begin,
        {"run_id": run_id, "policy_profile": policy_profile, "tool_pool": tool_pool},
    )
    return BeginResult.model_validate(out)


# ---------------------------------------------------------------- gate + plan card
class GateResult(Closed):
    ok: bool
    plan: Plan | None = None
    plan_digest: str | None = None
    error_code: str | None = None
    error_message: str | None = None


def _refuse(run_id: str, phase: str, exc: GatehouseError, subject: str) -> JsonObject:
    """Record a refusal as a security episode; the workflow then ends the run."""
    s = _session()
    evidence.put_episode(
        s,
        run_id,
        None,
        security_episode(
            run_id=run_id,
            subject=subject,
            code=exc.code,
            message=exc.message,
            executor_id=_exec_id(),
            recorded_at=now_iso(),
            details={"phase": phase, "refusal": exc.details},
        ),
    )
    return GateResult(ok=False, error_code=exc.code.value, error_message=exc.message).model_dump(
        mode="json"
    )


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


def _gate(arg: JsonObject) -> JsonObject:
    run_id = str(arg["run_id"])
    profile = PolicyProfile.model_validate(arg["profile"])
    pool = ToolPool.model_validate(arg["tool_pool"])
    mode = Mode(str(arg["mode"]))
    try:
        plan = gated_plan(arg["plan"], profile, pool)
    except GatehouseError as exc:
        return _refuse(run_id, "gate", exc, "plan")
    plan_json = plan.model_dump(mode="json")
    digest = digest_of(plan_json)
    s = _session()
    planned = mode is Mode.PLAN_ONLY
    runs.write_plan_card(s, run_id, plan, digest, "planned" if planned else "waiting_input")
    if not planned and profile.approval.mode == "auto_read_only" and read_only(plan):
        # The profile approves plans that cannot change anything; the decision
        # is recorded like a person's, under the policy's name.
        runs.insert_decision(
            s,
            approval_id="apr_" + digest[:32],
            run_id=run_id,
            plan_digest=digest,
            decision=Decision.APPROVED,
            decided_by=f"policy:{profile.profile_id}",
            comment="every step is read-only",
        )
    runs.set_status(
        s,
        run_id,
        RunStatus.PLANNED if planned else RunStatus.WAITING_APPROVAL,
        "done" if planned else "approval",
        plan_digest=digest,
    )
    evidence.put_episode(
        s,
        run_id,
        None,
        episode(
            run_id=run_id,
            kind="plan",
            subject=digest,
            episode_type="plan/agent_plan",
            status="completed",
            summary=f"plan of {len(plan.steps)} step(s) passed the gate",
            executor_id=_exec_id(),
            recorded_at=now_iso(),
            details={
                "plan_digest": digest,
                "steps": [st.step_id for st in plan.steps],
                "profile_id": profile.profile_id,
                "tool_pool_id": pool.tool_pool_id,
            },
            outputs=[DataRef(data_type="env.mova_agent_plan_v1", data_id=run_id, sha256=digest)],
        ),
    )
    return GateResult(ok=True, plan=plan, plan_digest=digest).model_dump(mode="json")


def gate_and_card(
    run_id: str, raw_plan: JsonObject, profile: PolicyProfile, pool: ToolPool, mode: Mode
) -> GateResult:
    out = _tx(
        "gatehouse.gate",
        _gate,
        {
            "run_id": run_id,
            "plan": raw_plan,
            "mode": mode.value,
            "profile": profile.model_dump(mode="json"),
            "tool_pool": pool.model_dump(mode="json"),
        },
    )
    return GateResult.model_validate(out)


# ---------------------------------------------------------------- approval
def _read_decision(arg: JsonObject) -> JsonObject:
    found = runs.decision_for(_session(), str(arg["run_id"]), str(arg["plan_digest"]))
    if found is None:
        return {"decision": None, "decided_by": None}
    return {"decision": found.decision.value, "decided_by": found.decided_by}


def read_decision(run_id: str, plan_digest: str) -> tuple[Decision, str] | None:
    """The plan_approvals row is the authority; messages only wake the wait."""
    out = _tx(
        "gatehouse.read_decision", _read_decision, {"run_id": run_id, "plan_digest": plan_digest}
    )
    if out["decision"] is None:
        return None
    return Decision(str(out["decision"])), str(out["decided_by"])


def _record_decision(arg: JsonObject) -> JsonObject:
    run_id, digest = str(arg["run_id"]), str(arg["plan_digest"])
    decision, decided_by = Decision(str(arg["decision"])), str(arg["decided_by"])
    s = _session()
    approved = decision is Decision.APPROVED
    runs.set_plan_card_status(s, run_id, decision.value)
    if approved:
        runs.set_status(s, run_id, RunStatus.RUNNING, "execute")
    evidence.put_episode(
        s,
        run_id,
        None,
        episode(
            run_id=run_id,
            kind="decision",
            subject=digest,
            episode_type="execution/approval",
            status="completed",
            summary=f"plan {decision.value} by {decided_by}",
            executor_id=decided_by,
            recorded_at=now_iso(),
            details={"plan_digest": digest, "decision": decision.value, "decided_by": decided_by},
        ),
    )
    return {}


def record_decision(run_id: str, plan_digest: str, decision: Decision, decided_by: str) -> None:
    _tx(
        "gatehouse.record_decision",
        _record_decision,
        {
            "run_id": run_id,
            "plan_digest": plan_digest,
            "decision": decision.value,
            "decided_by": decided_by,
        },
    )


def expire_plan_card(run_id: str) -> None:
    """No decision came in time: the card can no longer be decided (the run ends next)."""

    def _fn(arg: JsonObject) -> JsonObject:
        runs.set_plan_card_status(_session(), run_id, "expired")
        return {}

    _tx("gatehouse.expire_plan_card", _fn, {"run_id": run_id})


# ---------------------------------------------------------------- tamper check
def plan_problem(conn: Conn, run_id: str, digest: str) -> str | None:
    """Why the stored plan card is not the approved plan, or None if it is."""
    try:
        card = runs.get_plan_card(conn, run_id)
    except GatehouseError as corrupt:
        return corrupt.message
    if card is None:
        return "the plan card is missing"
    if card.plan_digest != digest:
        return "the plan card names another digest than the one approved"
    if digest_of(card.plan.model_dump(mode="json")) != digest:
        return "the stored plan no longer hashes to the approved digest"
    return None


def _verify_plan(arg: JsonObject) -> JsonObject:
    run_id, digest = str(arg["run_id"]), str(arg["plan_digest"])
    problem = plan_problem(_session(), run_id, digest)
    if problem is None:
        return {"ok": True}
    tampered = GatehouseError(
        ErrorCode.PLAN_TAMPERED, problem, {"approved_digest": digest, "run_id": run_id}
    )
    return _refuse(run_id, "execute", tampered, "plan_tampered")


def verify_plan(run_id: str, plan_digest: str) -> GateResult:
    """Right before the first step: the stored plan must still be the approved one."""
    out = _tx("gatehouse.verify_plan", _verify_plan, {"run_id": run_id, "plan_digest": plan_digest})
    return GateResult.model_validate(out)


# ---------------------------------------------------------------- steps
def _record_step(arg: JsonObject) -> JsonObject:
    run_id, step_id = str(arg["run_id"]), str(arg["step_id"])
    outcome = arg["outcome"]
    if not isinstance(outcome, dict):  # pragma: no cover - built by the workflow
        raise TypeError("outcome must be an object")
    ref = arg.get("output_schema_ref")
    ok, output, code, message = step_verdict(
        step_id, outcome, ref if isinstance(ref, str) else None
    )
    op = outcome.get("op_key")
    s = _session()
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
                executor_id=_exec_id(),
                recorded_at=now_iso(),
                details={"step_id": step_id, "refusal": output},
            ),
        )
    raw_output = outcome.get("output")
    if arg["driver_kind"] == DriverKind.OPENCODE.value and isinstance(raw_output, dict):
        for item in executor_episodes(
            run_id=run_id,
            step_id=step_id,
            op_key=op if isinstance(op, str) else None,
            output=raw_output,
            executor_id=_exec_id(),
            recorded_at=now_iso(),
        ):
            evidence.put_episode(s, run_id, step_id, item)
    status = "succeeded" if ok else "failed"
    runs.record_step(
        s,
        run_id=run_id,
        step_id=step_id,
        position=int(str(arg["position"])),
        driver_kind=str(arg["driver_kind"]),
        connector_id=str(arg["connector_id"]),
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
            episode_type=f"execution/{arg['driver_kind']}",
            status="completed" if ok else "failed",
            summary=f"step {step_id} {status}" + (f": {code}" if code else ""),
            executor_id=_exec_id(),
            recorded_at=now_iso(),
            details={
                "step_id": step_id,
                "op_key": op if isinstance(op, str) else None,
                "connector_id": str(arg["connector_id"]),
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


@dataclass(frozen=True)
class StepRecord:
    """A finished step, as the flow hands it to be recorded."""

    run_id: str
    step_id: str
    position: int
    driver_kind: str
    connector_id: str
    outcome: JsonObject
    output_schema_ref: str | None = None


def record_step_result(record: StepRecord) -> JsonObject:
    """Record a finished step; returns its final ok/error_code (output checked)."""
    return _tx(
        "gatehouse.record_step",
        _record_step,
        {
            "run_id": record.run_id,
            "step_id": record.step_id,
            "position": record.position,
            "driver_kind": record.driver_kind,
            "connector_id": record.connector_id,
            "outcome": record.outcome,
            "output_schema_ref": record.output_schema_ref,
        },
    )


# ---------------------------------------------------------------- finish
# How a run's end reads as a MOVA result_status.
_SUMMARY_STATUS: dict[RunStatus, ResultStatus] = {
    RunStatus.SUCCEEDED: "completed",
    RunStatus.PLANNED: "completed",
    RunStatus.REJECTED: "cancelled",
    RunStatus.FAILED: "failed",
}


def _finish(arg: JsonObject) -> JsonObject:
    run_id = str(arg["run_id"])
    status = RunStatus(str(arg["status"]))
    code = arg.get("error_code")
    message = arg.get("error_message")
    s = _session()
    trace = arg.get("trace_digest")
    if isinstance(trace, str):
        runs.set_trace_digest(s, run_id, trace)
    runs.set_status(
        s,
        run_id,
        status,
        "done",
        error_code=code if isinstance(code, str) else None,
        error_message=message if isinstance(message, str) else None,
    )
    evidence.put_episode(
        s,
        run_id,
        None,
        episode(
            run_id=run_id,
            kind="summary",
            subject="run",
            episode_type="execution/run_summary",
            status=_SUMMARY_STATUS[status],
            summary=f"run {status.value}",
            executor_id=_exec_id(),
            recorded_at=now_iso(),
            details={
                "status": status.value,
                "steps": arg["steps"],
                "error_code": code,
                "trace_digest": trace,
            },
        ),
    )
    return {}


@dataclass(frozen=True)
class RunEnd:
    """How a run ends, as the flow hands it to be recorded."""

    run_id: str
    status: RunStatus
    steps: list[JsonValue]
    error_code: str | None
    error_message: str | None
    trace_digest: str


def finish_run(end: RunEnd) -> None:
    _tx(
        "gatehouse.finish",
        _finish,
        {
            "run_id": end.run_id,
            "status": end.status.value,
            "steps": list(end.steps),
            "error_code": end.error_code,
            "error_message": end.error_message,
            "trace_digest": end.trace_digest,
        },
    )


# ---------------------------------------------------------------- in doubt
def _needs_operator(arg: JsonObject) -> JsonObject:
    run_id, op_key, step_id = str(arg["run_id"]), str(arg["op_key"]), str(arg["step_id"])
    s = _session()
    calls.mark_in_doubt(s, op_key)
    runs.set_status(s, run_id, RunStatus.NEEDS_OPERATOR, "operator")
    evidence.put_episode(
        s,
        run_id,
        step_id,
        episode(
            run_id=run_id,
            kind="in_doubt",
            subject=op_key,
            episode_type="execution/call_in_doubt",
            status="pending",
            summary=f"call for step {step_id} interrupted; waiting for an operator"
            f" (gatehouse calls resolve {op_key} --applied|--not-applied)",
            executor_id=_exec_id(),
            recorded_at=now_iso(),
            details={"op_key": op_key, "step_id": step_id},
        ),
    )
    return {}


def needs_operator(run_id: str, op_key: str, step_id: str) -> None:
    """The run stops in phase ``needs_operator`` until the call is resolved."""
    _tx(
        "gatehouse.needs_operator",
        _needs_operator,
        {"run_id": run_id, "op_key": op_key, "step_id": step_id},
    )


def read_resolution(op_key: str) -> str | None:
    """applied / not_applied once an operator has said so; None while in doubt."""

    def _fn(arg: JsonObject) -> JsonObject:
        row = calls.lookup(_session(), str(arg["op_key"]))
        status = None if row is None else row.status
        return {"resolution": status if status in calls.RESOLVED else None}

    out = _tx("gatehouse.read_resolution", _fn, {"op_key": op_key})
    found = out.get("resolution")
    return found if isinstance(found, str) else None


def resume_after_resolution(run_id: str) -> None:
    def _fn(arg: JsonObject) -> JsonObject:
        runs.set_status(_session(), str(arg["run_id"]), RunStatus.RUNNING, "execute")
        return {}

    _tx("gatehouse.resume", _fn, {"run_id": run_id})
