"""The gate step and the plan card: a plan checked, carded and digested; the
tamper check of the approved plan before anything runs."""

from __future__ import annotations

from contracts import (
    DataRef,
    Decision,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Mode,
    Plan,
    RunStatus,
    digest_of,
)
from ledger import Conn, approvals, evidence, now_iso, plan_cards, runs
from policies.episodes import episode, security_episode
from worker.flow import GateResult, PlanGated
from worker.runtime import WorkerSettings

__all__ = ["gate", "plan_check", "plan_problem"]


def _refuse(
    s: Conn, me: WorkerSettings, run_id: str, *, phase: str, exc: GatehouseError, subject: str
) -> JsonObject:
    """Record a refusal as a security episode; the workflow then ends the run."""
    evidence.put_episode(
        s,
        run_id,
        None,
        security_episode(
            run_id=run_id,
            subject=subject,
            code=exc.code,
            message=exc.message,
            executor_id=me.executor_id,
            recorded_at=now_iso(),
            details={"phase": phase, "refusal": exc.details},
        ),
    )
    return GateResult(ok=False, error_code=exc.code.value, error_message=exc.message).model_dump(
        mode="json"
    )


def gate(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """What the gate decided (a ``PlanGated``, decided in the flow) written: the plan
    carded, or the refusal as a security episode; its ``GateResult``. Run as a datasource
    transaction: its rows and the checkpoint commit together."""
    gated = PlanGated.model_validate(arg)
    run_id, mode, repaired = gated.run_id, gated.mode, gated.repaired
    plan, digest = gated.plan, gated.plan_digest
    if plan is None or digest is None or gated.error_code is not None:
        refused = GatehouseError(
            ErrorCode(gated.error_code or ErrorCode.PLAN_INVALID.value),
            gated.error_message or "the plan was refused",
            gated.error_details or {},
        )
        # A plan that still fails after its repair is refused for good.
        phase = "repair" if repaired else "gate"
        return _refuse(s, me, run_id, phase=phase, exc=refused, subject="plan")
    reviewed = gated.outside_data or ""
    changes = gated.changes
    planned = mode is Mode.PLAN_ONLY
    # The run's row first: a decision or a cancel locks it before writing, so
    # taking it first here keeps the two from waiting on each other.
    runs.set_status(
        s,
        run_id,
        RunStatus.PLANNED if planned else RunStatus.WAITING_APPROVAL,
        "done" if planned else "approval",
        plan_digest=digest,
    )
    if gated.budgets is not None:
        runs.set_budgets(s, run_id, gated.budgets)
    if gated.previous_digest is not None:
        revision = plan_cards.add_revision(
            s, run_id, plan, digest, previous_digest=gated.previous_digest, changes=changes
        )
    else:
        plan_cards.write_plan_card(
            s, run_id, plan, digest, "planned" if planned else "waiting_input"
        )
        revision = plan_cards.add_revision(s, run_id, plan, digest)
    if gated.approved_by is not None:
        # The profile approves plans that cannot change anything; the decision
        # is recorded like a person's, under the policy's name.
        approvals.insert_decision(
            s,
            run_id=run_id,
            plan_digest=digest,
            decision=Decision.APPROVED,
            decided_by=gated.approved_by,
            comment="every step is read-only",
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
            summary=f"plan of {len(plan.steps)} step(s) passed the gate"
            + (f" (revision {revision}, repaired)" if repaired else "")
            + (
                f" (revision {revision}, with the outside data step {reviewed!r} takes)"
                if reviewed
                else ""
            ),
            executor_id=me.executor_id,
            recorded_at=now_iso(),
            details={
                "plan_digest": digest,
                "steps": [st.step_id for st in plan.steps],
                "profile_id": gated.profile_id,
                "tool_pool_id": gated.tool_pool_id,
                "revision": revision,
                "repaired": repaired,
                "outside_data": reviewed or None,
                "previous_digest": gated.previous_digest,
                "changes": changes,
            },
            outputs=[DataRef(data_type="env.mova_agent_plan_v1", data_id=run_id, sha256=digest)],
        ),
    )
    return GateResult(ok=True, plan=plan, plan_digest=digest).model_dump(mode="json")


def plan_problem(conn: Conn, run_id: str, digest: str, *, history: bool = False) -> str | None:
    """Why the stored plan card is not the approved plan, or None if it is.

    ``history`` (a replay): the approved plan may be an earlier revision of the
    card, one a repair replaced since; it is checked as stored then."""
    try:
        card = plan_cards.get_plan_card(conn, run_id)
    except GatehouseError as corrupt:
        return corrupt.message
    if card is None:
        return "the plan card is missing"
    if card.plan_digest != digest and history:
        stored = plan_cards.revision_plan(conn, run_id, digest)
        if stored is None:
            return "no revision of the plan card has the approved digest"
        if digest_of(Plan.model_validate_json(stored).model_dump(mode="json")) != digest:
            return "the stored revision no longer hashes to the approved digest"
        return None
    if card.plan_digest != digest:
        return "the plan card names another digest than the one approved"
    if digest_of(card.plan.model_dump(mode="json")) != digest:
        return "the stored plan no longer hashes to the approved digest"
    return None


def plan_check(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """Right before the first step: the stored plan must still be the approved one
    (``{ok: true}``), else a refused ``GateResult`` with its security episode."""
    run_id, digest = str(arg["run_id"]), str(arg["plan_digest"])
    problem = plan_problem(s, run_id, digest)
    if problem is None:
        return {"ok": True}
    tampered = GatehouseError(
        ErrorCode.PLAN_TAMPERED, problem, {"approved_digest": digest, "run_id": run_id}
    )
    return _refuse(s, me, run_id, phase="execute", exc=tampered, subject="plan_tampered")
