"""Decisions by people: approvals and rejections of a plan, and an operator's
word on a call in doubt."""

from __future__ import annotations

from contracts import (
    Decision,
    JsonObject,
    RunStatus,
)
from ledger import approvals, calls, evidence, now_iso, plan_cards, runs
from policies.episodes import episode
from worker.records._tx import exec_id, session, tx
from worker.records.cancels import observe_cancel
from worker.records.gate import stored_plan_check

__all__ = [
    "expire_plan_card",
    "needs_operator",
    "read_decision",
    "read_resolution",
    "record_decision",
    "resume_after_resolution",
    "take_decision",
]


def _read_decision(arg: JsonObject) -> JsonObject:
    found = approvals.decision_for(session(), str(arg["run_id"]), str(arg["plan_digest"]))
    if found is None:
        return {"decision": None, "decided_by": None}
    return {"decision": found.decision.value, "decided_by": found.decided_by}


def read_decision(run_id: str, plan_digest: str) -> tuple[Decision, str] | None:
    """The plan_approvals row is the authority; messages only wake the wait."""
    out = tx(
        "gatehouse.read_decision", _read_decision, {"run_id": run_id, "plan_digest": plan_digest}
    )
    if out["decision"] is None:
        return None
    return Decision(str(out["decision"])), str(out["decided_by"])


def _record_decision(arg: JsonObject) -> JsonObject:
    run_id, digest = str(arg["run_id"]), str(arg["plan_digest"])
    decision, decided_by = Decision(str(arg["decision"])), str(arg["decided_by"])
    s = session()
    approved = decision is Decision.APPROVED
    plan_cards.set_plan_card_status(s, run_id, decision.value)
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
    tx(
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
        plan_cards.set_plan_card_status(session(), run_id, "expired")
        return {}

    tx("gatehouse.expire_plan_card", _fn, {"run_id": run_id})


def _needs_operator(arg: JsonObject) -> JsonObject:
    run_id, op_key, step_id = str(arg["run_id"]), str(arg["op_key"]), str(arg["step_id"])
    s = session()
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
            executor_id=exec_id(),
            recorded_at=now_iso(),
            details={"op_key": op_key, "step_id": step_id},
        ),
    )
    return {}


def needs_operator(run_id: str, op_key: str, step_id: str) -> None:
    """The run stops in phase ``needs_operator`` until the call is resolved."""
    tx(
        "gatehouse.needs_operator",
        _needs_operator,
        {"run_id": run_id, "op_key": op_key, "step_id": step_id},
    )


def read_resolution(op_key: str) -> str | None:
    """applied / not_applied once an operator has said so; None while in doubt."""

    def _fn(arg: JsonObject) -> JsonObject:
        row = calls.lookup(session(), str(arg["op_key"]))
        status = None if row is None else row.status
        return {"resolution": status if status in calls.RESOLVED else None}

    out = tx("gatehouse.read_resolution", _fn, {"op_key": op_key})
    found = out.get("resolution")
    return found if isinstance(found, str) else None


def resume_after_resolution(run_id: str) -> None:
    def _fn(arg: JsonObject) -> JsonObject:
        runs.set_status(session(), str(arg["run_id"]), RunStatus.RUNNING, "execute")
        return {}

    tx("gatehouse.resume", _fn, {"run_id": run_id})


def _take_decision(arg: JsonObject) -> JsonObject:
    run_id, digest, at = str(arg["run_id"]), str(arg["plan_digest"]), str(arg["at"])
    s = session()
    found = approvals.decision_for(s, run_id, digest)
    out: JsonObject = {"decision": None, "decided_by": None, "cancelled": None, "verified": None}
    if found is not None:
        out["decision"], out["decided_by"] = found.decision.value, found.decided_by
        _record_decision({**arg, "decision": found.decision.value, "decided_by": found.decided_by})
    out["cancelled"] = observe_cancel(s, run_id, at, exec_id())
    if found is not None and found.decision is Decision.APPROVED and out["cancelled"] is None:
        out["verified"] = stored_plan_check({"run_id": run_id, "plan_digest": digest})
    return out


def take_decision(run_id: str, plan_digest: str, at: str) -> JsonObject:
    """One commit for what follows a wake-up of the approval wait: the decision on
    ``plan_digest`` read (the plan_approvals row is the authority) and recorded, the
    boundary ``at`` checked for a cancel, and an approved plan checked against the
    stored one. ``{decision, decided_by, cancelled, verified}``, each None when
    there is none (``verified``: a GateResult as JSON)."""
    return tx(
        "gatehouse.take_decision",
        _take_decision,
        {"run_id": run_id, "plan_digest": plan_digest, "at": at},
    )
