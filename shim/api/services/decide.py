"""Decisions on a run's plan (``POST /approve|reject/{run_id}``).

The ``plan_approvals`` row is the authority, written in one transaction with
the checks and with the hand-off of a parked run to its next stretch; for a run
parked with its continuation, the decision's records too, so that stretch goes
on from the decision at once (``_taken_here``). A run begun before runs were
split waits in place; a ``send`` after the commit wakes it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

from contracts import (
    APPROVAL_TOPIC,
    ApprovalRequest,
    Decision,
    DecisionAccepted,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Mode,
    Plan,
    PlanCardView,
    PolicyProfile,
    QuorumView,
    Role,
    RunStatus,
    RunView,
    digest_of,
    with_placeholders,
)
from ledger import approvals, edits, events, intents, now_iso, plan_cards, runs, stretches
from policies import catalog
from policies.episodes import decision_episode
from policies.quorum import approvers_needed, counted, parties
from shim.api.services.acting import acting_as
from shim.api.services.cancel import refuse_if_cancelled
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["decide", "refuse_a_party", "refuse_if_expired", "why_not"]


def _not_awaiting(run_id: str, status: RunStatus) -> GatehouseError:
    return GatehouseError(
        ErrorCode.RUN_NOT_AWAITING_APPROVAL,
        f"run {run_id!r} is {status.value}; it takes no decision",
        {"status": status.value},
    )


def _endorse(
    conn: Connection,
    run_id: str,
    body: ApprovalRequest,
    who: Identity,
    needed: int,
    *,
    barred: frozenset[str],
) -> tuple[bool, QuorumView]:
    """One approval toward a plan's quorum: whether it is new (a repeat counts once),
    and who approved the plan so far (none of ``barred``, who may not decide on it)."""
    fresh = approvals.endorse(
        conn, run_id, body.plan_digest, body.decided_by, comment=body.comment,
        token_id=who.token_id,
    )  # fmt: skip
    so_far = counted(approvals.endorsers(conn, run_id, body.plan_digest), barred)
    return fresh, QuorumView(needed=needed, approved_by=so_far)


def _short_of_quorum(
    run_id: str, body: ApprovalRequest, fresh: bool, quorum: QuorumView
) -> DecisionAccepted:
    """Counted, and the plan still waits for more approvers."""
    return DecisionAccepted(
        run_id=run_id,
        plan_digest=body.plan_digest,
        decision=Decision.APPROVED,
        decided_by=body.decided_by,
        recorded=fresh,
        quorum=quorum,
    )


def _answer(
    run_id: str,
    body: ApprovalRequest,
    decision: Decision,
    on_record: approvals.Decided,
    quorum: QuorumView | None = None,
) -> DecisionAccepted:
    """The decision on record: this one (``recorded``), a repeat of it, or a refusal."""
    if on_record.decision is not decision:
        raise GatehouseError(
            ErrorCode.ALREADY_DECIDED,
            f"this plan was already {on_record.decision.value} by {on_record.decided_by}",
            {"decision": on_record.decision.value, "decided_by": on_record.decided_by},
        )
    return DecisionAccepted(
        run_id=run_id,
        plan_digest=body.plan_digest,
        decision=decision,
        decided_by=on_record.decided_by,
        recorded=on_record.inserted,
        quorum=quorum,
    )


def _taken_here(
    conn: Connection, run_id: str, body: ApprovalRequest, decision: Decision, *, intact: bool
) -> Callable[[JsonObject], JsonObject | None]:
    """For a run parked at this decision with its continuation: the decision taken in
    the approval's own transaction, so the next stretch goes on at once from it
    (``StretchJob.decided``). What the worker's ``gatehouse.decision_or_park`` does
    when the decision is there first: the decision's records (plan card, run status,
    episode), the wait answered (by the hand-off, with the park taken, when this
    answers the decision). The checks it makes first were made by ``decide``
    in this transaction, holding the run's row lock since ``refuse_if_cancelled``
    took it: no cancel is on record (one would have been refused), and ``intact``,
    the stored plan card names the digest decided on and still hashes to it. A card
    that does not is left to the stretch, which refuses it (plan_tampered) with its
    security record."""

    def take(then: JsonObject) -> JsonObject | None:
        if not intact or then.get("plan_digest") != body.plan_digest:
            return None
        decided = decision_episode(
            run_id, body.plan_digest, decision.value, body.decided_by, now_iso()
        )
        runs.record_decision(conn, run_id, decision, decided)
        return {
            "plan_digest": body.plan_digest,
            "decision": decision.value,
            "decided_by": body.decided_by,
        }

    return take


def _decided_on(
    run_id: str,
    status: RunStatus,
    *,
    card: PlanCardView | None,
    supplied: Plan | None,
    body: ApprovalRequest,
    decision: Decision,
) -> tuple[Plan, JsonValue]:
    """The plan a decision is on (its model and its JSON): the card's, or before
    the card a run-plan's own; refused when there is none yet, when ``body`` names another
    digest, or when an approval could not run it."""
    if card is not None:
        plan_model = card.plan
        expected, plan = card.plan_digest, card.plan.model_dump(mode="json")
    elif supplied is not None:
        # run-plan: the plan is known before the worker gets to it, so a
        # decision may arrive before the plan card does.
        plan_model = supplied
        plan = supplied.model_dump(mode="json")
        expected = digest_of(plan)
    elif status.terminal:
        raise _not_awaiting(run_id, status)
    else:
        raise GatehouseError(
            ErrorCode.RUN_NOT_AWAITING_APPROVAL,
            f"run {run_id!r} has no plan yet; decide once its plan card exists",
            {"status": status.value},
        )
    if body.plan_digest != expected:
        if status.terminal:
            raise _not_awaiting(run_id, status)
        raise GatehouseError(
            ErrorCode.STALE_PLAN_DIGEST,
            "the decision names a plan digest that is not this run's plan",
            {"given": body.plan_digest, "current": expected},
        )
    if decision is Decision.APPROVED and with_placeholders(plan)[1]:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            "the plan holds a number no JSON can carry (stored before Gatehouse refused"
            " such numbers at the door): it cannot run; reject or cancel the run",
            {"plan_digest": expected},
        )
    return plan_model, plan


def decide(
    service: Service,
    run_id: str,
    *,
    body: ApprovalRequest,
    decision: Decision,
    who: Identity,
) -> DecisionAccepted:
    """A decision on the run's current plan, as ``who``; a repeat answers as the first."""
    db, client = service.db, service.client
    body = acting_as(body, "decided_by", who)
    # The run's events are written at the end, in one statement (``events.batched``).
    with db.engine.begin() as conn, events.batched(conn):
        # first: cancel and decision race here
        locked = refuse_if_cancelled(conn, run_id)
        if locked is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        status = locked.status
        request = intents.request_for_run(conn, run_id)
        if request is None or request.mode is Mode.PLAN_ONLY:
            raise _not_awaiting(run_id, status)
        profile = catalog.profile(request.policy_profile).model
        barred = refuse_a_party(conn, run_id, profile, request.submitted_by, who)
        card = plan_cards.get_plan_card(conn, run_id)
        plan_model, plan = _decided_on(
            run_id, status, card=card, supplied=request.plan, body=body, decision=decision
        )
        # The plan's decision keeps its answer after the run moved on: a repeat
        # is a repeat and an opposite decision is already_decided, however late.
        on_record = approvals.decision_for(conn, run_id, body.plan_digest)
        split = False
        quorum: QuorumView | None = None
        if on_record is None:
            if status.terminal:
                raise _not_awaiting(run_id, status)
            refuse_if_expired(run_id, locked.wait)
            needed = approvers_needed(profile, plan_model)
            if decision is Decision.APPROVED and needed > 1:
                fresh, quorum = _endorse(conn, run_id, body, who, needed, barred=barred)
                if quorum.missing:
                    return _short_of_quorum(run_id, body, fresh, quorum)
            on_record = approvals.insert_decision(
                conn,
                run_id=run_id,
                plan_digest=body.plan_digest,
                decision=decision,
                decided_by=body.decided_by,
                comment=body.comment,
                token_id=who.token_id,
            )
            # the card read above, under the row lock: still the plan decided on?
            intact = card is not None and digest_of(plan) == card.plan_digest == body.plan_digest
            taker = _taken_here(conn, run_id, body, decision, intact=intact)
            split = service.hand_off(conn, run_id, taker, locked=locked)
    answer = _answer(run_id, body, decision, on_record, quorum)
    if status.terminal or split or not on_record.inserted:
        return answer  # handed to the run's next stretch, or nothing waits for it
    # A run from before the split waits in place: this wakes it now rather than
    # at its next re-check (the row is the authority). Repeats are de-duplicated.
    client.send(
        run_id,
        {"plan_digest": body.plan_digest, "decision": decision.value},
        APPROVAL_TOPIC,
        idempotency_key=f"{run_id}:{body.plan_digest}",
    )
    return answer


def refuse_a_party(
    conn: Connection, run_id: str, profile: PolicyProfile, submitter: str, who: Identity
) -> frozenset[str]:
    """Four-eyes; answers who may not decide on the plan (nor count toward its quorum).

    Whoever submitted the run may not, where the profile says so. A plan that came
    through edits or forks, whatever the profile says, is decided by nobody who wrote
    any part of it: the first run's submitter, every editor and every fork's requester
    on the whole chain back to that run (``edits.authors``), not just the last link,
    or two approvers editing in turn could each approve the other's change."""
    chain = edits.authors(conn, run_id)
    if not chain.whole:
        raise GatehouseError(
            ErrorCode.FOUR_EYES,
            f"the plan of run {run_id!r} came through more edits and forks than Gatehouse"
            f" follows ({edits.CHAIN_LIMIT}), or from a run that is gone: who wrote it is"
            " not known, so nobody may decide on it",
            {"run_id": run_id},
        )
    refused = parties(profile, submitter, chain.found)
    if who.name not in refused:
        return refused
    if not any(a.part != "submitted" for a in chain.found):
        raise GatehouseError(
            ErrorCode.FOUR_EYES,
            f"{who.name} submitted run {run_id!r} and may not decide on its plan",
            {"profile_id": profile.profile_id},
        )
    mine = [a for a in chain.found if a.name == who.name]
    written = ", ".join(f"{a.name} ({a.part})" for a in chain.found)
    # The nearest part they wrote names it (a submitter who later edited: the edit).
    part, at = (mine[-1].part, mine[-1].run_id) if mine else ("submitted", run_id)
    done, key = _PARTS[part]
    raise GatehouseError(
        ErrorCode.FOUR_EYES,
        f"{who.name} {done} the plan of run {run_id!r} (in run {at}); it was written by"
        f" {written}: someone who wrote no part of it decides on it",
        {"run_id": at, key: who.name, "authors": [a.name for a in chain.found]},
    )


# How a refusal names each part of a plan a person wrote, and the detail it sets.
_PARTS = {
    "submitted": ("submitted", "submitted_by"),
    "edited": ("edited", "edited_by"),
    "forked": ("asked for a fork of", "requested_by"),
}


def why_not(service: Service, view: RunView, who: Identity) -> GatehouseError | None:
    """Why ``who`` may not decide on the plan of the run ``view`` shows (None: they may,
    as far as who they are goes): the refusal ``decide`` would answer. For a page that
    offers a decision only to those who can make it."""
    if not who.has(Role.APPROVER):
        return GatehouseError(
            ErrorCode.FORBIDDEN, f"{who.name} is not an approver: only an approver decides"
        )
    try:
        profile = catalog.profile(view.policy_profile).model
        with service.db.engine.connect() as conn:
            refuse_a_party(conn, view.run_id, profile, view.submitted_by, who)
    except GatehouseError as exc:
        return exc
    if view.quorum is not None and who.name in view.quorum.approved_by:
        return GatehouseError(
            ErrorCode.ALREADY_DECIDED,
            f"{who.name} approved this plan already; it waits for another approver",
        )
    return None


def refuse_if_expired(run_id: str, wait: tuple[str, str | None] | None) -> None:
    """A plan whose wait is over takes no decision, even before the expiry sweep
    has ended its run. ``wait``: the run's, as locked (``stretches.Locked.wait``)."""
    if wait is None or not wait[0].startswith("@approval"):
        return
    if stretches.deadline_passed(wait[1]):
        raise GatehouseError(
            ErrorCode.APPROVAL_TIMEOUT,
            f"the plan of run {run_id!r} waited past {wait[1]} for a decision;"
            " it can no longer be decided",
            {"expired_at": wait[1]},
        )
