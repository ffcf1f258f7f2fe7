"""Decisions by people: approvals and rejections of a plan, and an operator's
word on a call in doubt."""

from __future__ import annotations

from collections.abc import Callable

from contracts import Decision, JsonObject, RunStatus
from ledger import Conn, approvals, calls, evidence, now_iso, plan_cards, runs, stretches
from policies.episodes import decision_episode, episode
from worker.records._cancels import observe_cancel
from worker.records._gate import plan_check
from worker.runtime import WorkerSettings

__all__ = [
    "SUPERSEDED",
    "decision_or_park",
    "expire_plan_card",
    "needs_operator",
    "read_resolution",
    "resolution_or_park",
    "resume_after_resolution",
    "stale",
    "take_decision",
    "wait_deadline",
]


def _record_decision(s: Conn, arg: JsonObject) -> None:
    run_id, digest = str(arg["run_id"]), str(arg["plan_digest"])
    decision, decided_by = Decision(str(arg["decision"])), str(arg["decided_by"])
    recorded = decision_episode(run_id, digest, decision.value, decided_by, now_iso())
    runs.record_decision(s, run_id, decision, recorded)


def take_decision(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """One commit for what follows a wake-up of the approval wait: the decision on
    ``plan_digest`` read (the plan_approvals row is the authority) and recorded, the
    boundary ``at`` checked for a cancel, and an approved plan checked against the
    stored one. ``{decision, decided_by, cancelled, verified}``, each None when
    there is none (``verified``: a GateResult as JSON)."""
    run_id, digest, at = str(arg["run_id"]), str(arg["plan_digest"]), str(arg["at"])
    found = approvals.decision_for(s, run_id, digest)
    if found is None:
        # The flow puts its plan on the card before every wait, so the card names the
        # digest waited on; a card naming another was rewritten behind Gatehouse's
        # back. A decision on that card still ends the wait — a rejection rejects, an
        # approval fails the plan check below (plan_tampered) — instead of the run
        # parking again for a decision nobody can make.
        card = plan_cards.card_digest(s, run_id)
        if card is not None and card != digest:
            found = approvals.decision_for(s, run_id, card)
    out: JsonObject = {"decision": None, "decided_by": None, "cancelled": None, "verified": None}
    if found is not None:
        out["decision"], out["decided_by"] = found.decision.value, found.decided_by
        _record_decision(
            s, {**arg, "decision": found.decision.value, "decided_by": found.decided_by}
        )
    out["cancelled"] = observe_cancel(s, run_id, at, me.executor_id)
    if found is not None and found.decision is Decision.APPROVED and out["cancelled"] is None:
        out["verified"] = plan_check(s, {"run_id": run_id, "plan_digest": digest}, me)
    return out


def decision_or_park(
    s: Conn,
    arg: JsonObject,
    me: WorkerSettings,
    *,
    then: Callable[[], JsonObject] | None = None,
) -> JsonObject:
    """A split run at its approval wait, in one commit with the run's row locked:
    ``take_decision``'s answer when a decision or a cancel is on record; the card
    expired (``expired``) when its wait is over; else the run parked at ``wait``
    (``parked``), for whoever decides to hand it to its next stretch. ``until``:
    the wait's expiry when the stretch resumes at it; a first arrival sets it
    ``timeout_s`` from now; ``then()``: where the run goes on once decided
    (``contracts.Continuation`` as JSON), asked for only when it parks, and parked
    with it for the next stretch to start from."""
    run_id = str(arg["run_id"])
    if stale(s, arg):  # the row lock: a decision commits wholly before this or after it
        return dict(SUPERSEDED)
    out = take_decision(s, arg, me)
    if out["decision"] is not None or out["cancelled"] is not None:
        stretches.answered(s, run_id)
        return out
    deadline = wait_deadline(arg)
    if stretches.deadline_passed(deadline):
        stretches.answered(s, run_id)
        plan_cards.set_plan_card_status(s, run_id, "expired")
        return {**out, "expired": True}
    stretches.park(
        s,
        run_id,
        wait=int(str(arg["wait"])),
        at=str(arg["at"]),
        deadline=deadline,
        version=me.app_version,
        continuation=None if then is None else then(),
    )
    return {**out, "parked": True}


# What a stale execution of a stretch is told at a wait a later stretch has taken
# over: nothing written; it ends as if it had parked there (``parked``). Read-only:
# answer a copy.
SUPERSEDED: JsonObject = {"parked": True, "superseded": True}


def stale(s: Conn, arg: JsonObject) -> bool:
    """Take the run's row lock, then answer whether the run is in a later stretch than
    ``arg["stretch"]``, the stretch asking: DBOS ran this wait's step again after the
    park it wrote was handed on (its record of the step was lost to a full disk), and
    the stretch it was handed to runs the rest; going on too would run the run's
    calls twice."""
    locked = stretches.lock(s, str(arg["run_id"]))
    return locked is not None and locked.superseded(int(str(arg.get("stretch") or 0)))


def wait_deadline(arg: JsonObject) -> str | None:
    """A wait's expiry: ``until`` when a stretch resumes at it, else ``timeout_s`` from now."""
    given = arg.get("until")
    if isinstance(given, str):
        return given
    timeout = arg.get("timeout_s")
    return stretches.until(float(timeout)) if isinstance(timeout, int | float) else None


def resolution_or_park(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """A split run at a call in doubt, in one commit with the run's row locked:
    ``{resolution}`` once an operator has resolved it (the run goes on); else the
    call marked in doubt (once) and the run parked at ``wait`` (``parked``)."""
    run_id, op_key = str(arg["run_id"]), str(arg["op_key"])
    if stale(s, arg):
        return dict(SUPERSEDED)
    row = calls.lookup(s, op_key)
    if row is not None and row.status in calls.RESOLVED:
        stretches.answered(s, run_id)
        resume_after_resolution(s, arg, me)
        return {"resolution": row.status}
    if runs.run_status(s, run_id) is not RunStatus.NEEDS_OPERATOR:
        needs_operator(s, arg, me)
    stretches.park(
        s, run_id, wait=int(str(arg["wait"])), at=op_key, deadline=None, version=me.app_version
    )
    return {"resolution": None, "parked": True}


def expire_plan_card(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """No decision came in time: the card can no longer be decided (the run ends next)."""
    plan_cards.set_plan_card_status(s, str(arg["run_id"]), "expired")
    return {}


def needs_operator(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """The run stops in phase ``needs_operator`` until the call is resolved."""
    run_id, op_key, step_id = str(arg["run_id"]), str(arg["op_key"]), str(arg["step_id"])
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
            executor_id=me.executor_id,
            recorded_at=now_iso(),
            details={"op_key": op_key, "step_id": step_id},
        ),
    )
    return {}


def read_resolution(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """``{resolution}``: applied / not_applied once an operator has said so; None while
    in doubt."""
    row = calls.lookup(s, str(arg["op_key"]))
    status = None if row is None else row.status
    return {"resolution": status if status in calls.RESOLVED else None}


def resume_after_resolution(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    runs.set_status(s, str(arg["run_id"]), RunStatus.RUNNING, "execute")
    return {}
