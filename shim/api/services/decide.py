"""Decisions on a run's plan (``POST /approve|reject/{run_id}``).

The ``plan_approvals`` row is the authority, written in one transaction with
the checks and with the hand-off of a parked run to its next stretch. A run
begun before runs were split waits in place; a ``send`` after the commit
wakes it.
"""

from __future__ import annotations

import uuid

from sqlalchemy.engine import Connection

from contracts import (
    APPROVAL_TOPIC,
    ApprovalRequest,
    Decision,
    DecisionAccepted,
    ErrorCode,
    GatehouseError,
    JsonValue,
    Mode,
    PolicyProfile,
    QuorumView,
    Role,
    RunStatus,
    RunView,
    digest_of,
    with_placeholders,
)
from ledger import approvals, edits, forks, intents, plan_cards, stretches
from policies import catalog
from policies.quorum import approvers_needed
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
    conn: Connection, run_id: str, body: ApprovalRequest, who: Identity, needed: int
) -> tuple[bool, QuorumView]:
    """One approval toward a plan's quorum: whether it is new (a repeat counts once),
    and who approved the plan so far."""
    fresh = approvals.endorse(
        conn, run_id, body.plan_digest, body.decided_by, comment=body.comment,
        token_id=who.token_id,
    )  # fmt: skip
    so_far = approvals.endorsers(conn, run_id, body.plan_digest)
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
    with db.engine.begin() as conn:
        # first: cancel and decision race here
        status = refuse_if_cancelled(conn, client, run_id)
        if status is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        request = intents.request_for_run(conn, run_id)
        if request is None or request.mode is Mode.PLAN_ONLY:
            raise _not_awaiting(run_id, status)
        profile = catalog.profile(request.policy_profile).model
        refuse_a_party(conn, run_id, profile, request.submitted_by, who)
        card = plan_cards.get_plan_card(conn, run_id)
        plan: JsonValue = None
        if card is not None:
            plan_model = card.plan
            expected, plan = card.plan_digest, card.plan.model_dump(mode="json")
        elif request.plan is not None:
            # run-plan: the plan is known before the worker gets to it, so a
            # decision may arrive before the plan card does.
            plan_model = request.plan
            plan = request.plan.model_dump(mode="json")
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
        # The plan's decision keeps its answer after the run moved on: a repeat
        # is a repeat and an opposite decision is already_decided, however late.
        on_record = approvals.decision_for(conn, run_id, body.plan_digest)
        split = False
        quorum: QuorumView | None = None
        if on_record is None:
            if status.terminal:
                raise _not_awaiting(run_id, status)
            refuse_if_expired(conn, run_id)
            needed = approvers_needed(profile, plan_model)
            if decision is Decision.APPROVED and needed > 1:
                fresh, quorum = _endorse(conn, run_id, body, who, needed)
                if quorum.missing:
                    return _short_of_quorum(run_id, body, fresh, quorum)
            on_record = approvals.insert_decision(
                conn,
                approval_id="apr_" + uuid.uuid4().hex,
                run_id=run_id,
                plan_digest=body.plan_digest,
                decision=decision,
                decided_by=body.decided_by,
                comment=body.comment,
                token_id=who.token_id,
            )
            split = service.hand_off(conn, run_id)
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
) -> None:
    """Four-eyes: whoever submitted the run (where the profile says so) may not decide
    on its plan; nor, whatever the profile says, whoever edited it into this run (and
    its first submitter), nor whoever asked for a fork (and the parent's submitter)."""
    if profile.approval.four_eyes and submitter == who.name:
        raise GatehouseError(
            ErrorCode.FOUR_EYES,
            f"{who.name} submitted run {run_id!r} and may not decide on its plan",
            {"profile_id": profile.profile_id},
        )
    edit = edits.edit_of(conn, run_id)
    if edit is not None and who.name in (edit.edited_by, submitter):
        raise GatehouseError(
            ErrorCode.FOUR_EYES,
            f"run {run_id!r} holds a plan {edit.edited_by} edited (from run"
            f" {edit.parent_run_id}, first submitted by {submitter}); someone else decides on it",
            {"parent_run_id": edit.parent_run_id, "edited_by": edit.edited_by},
        )
    fork = forks.requested(conn, run_id)
    if fork is not None and who.name in (fork[1], submitter):
        parent_run_id, requested_by = fork
        raise GatehouseError(
            ErrorCode.FOUR_EYES,
            f"run {run_id!r} is a fork of {parent_run_id} asked for by {requested_by}"
            f" (first submitted by {submitter}); someone else decides on its plan",
            {"parent_run_id": parent_run_id, "requested_by": requested_by},
        )


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


def refuse_if_expired(conn: Connection, run_id: str) -> None:
    """A plan whose wait is over takes no decision, even before the expiry sweep
    has ended its run."""
    wait = stretches.waiting_until(conn, run_id)
    if wait is None or not wait[0].startswith("@approval"):
        return
    if stretches.deadline_passed(wait[1]):
        raise GatehouseError(
            ErrorCode.APPROVAL_TIMEOUT,
            f"the plan of run {run_id!r} waited past {wait[1]} for a decision;"
            " it can no longer be decided",
            {"expired_at": wait[1]},
        )
