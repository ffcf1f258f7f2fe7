"""An approver's edit of a plan waiting for a decision (``POST /runs/{run_id}/plan``).

An edit is a decision and a new run, in one transaction: the plan it was made from
is rejected (recorded as decided by the editor, the comment naming the run the edit
became), and the edited plan, gated again under the same profile and tool pool,
waits on a run of its own, submitted for the same person, linked to the run and the
digest it came from (``plan_edits``). That plan is decided by someone who wrote no
part of it: not its editor, nor the original submitter, nor anyone who edited or
forked a run on its way here (``decide.refuse_a_party``), and none of them may edit
it again. An edit that keeps some steps and drops others is how a person approves
part of a plan.
"""

from __future__ import annotations

import uuid

from contracts import (
    Decision,
    ErrorCode,
    GatehouseError,
    IntentJob,
    IntentRequest,
    Mode,
    PlanEditAccepted,
    PlanEditRequest,
    RunStatus,
    digest_of,
    new_run_id,
)
from ledger import approvals, edits, intents, opa_runs, plan_cards, stretches
from policies import catalog
from shim.api.services.acting import run_links
from shim.api.services.cancel import refuse_if_cancelled
from shim.api.services.core import Service
from shim.api.services.decide import refuse_a_party, refuse_if_expired
from shim.api.services.submit import check_intent
from shim.tokens import Identity

__all__ = ["edit_plan"]


def _edited_request(parent: IntentRequest, body: PlanEditRequest) -> IntentRequest:
    """The parent's intent, now to run the edited plan as it stands."""
    fields = parent.model_dump(mode="json")
    fields.update(mode=Mode.RUN_PLAN.value, plan=body.plan.model_dump(mode="json"))
    return IntentRequest.model_validate(fields)


def edit_plan(
    service: Service, run_id: str, *, body: PlanEditRequest, who: Identity
) -> PlanEditAccepted:
    db = service.db
    new_digest = digest_of(body.plan.model_dump(mode="json"))
    if new_digest == body.previous_digest:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, "the edited plan changes nothing")
    new_id = new_run_id()
    with db.engine.begin() as conn:
        locked = refuse_if_cancelled(conn, run_id)  # first: the run's row lock
        parent = intents.request_for_run(conn, run_id)
        card = plan_cards.get_plan_card(conn, run_id)
        if locked is None or parent is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        status = locked.status
        if status is not RunStatus.WAITING_APPROVAL or card is None:
            raise GatehouseError(
                ErrorCode.RUN_NOT_AWAITING_APPROVAL,
                f"run {run_id!r} is {status.value}: only a plan waiting for a decision is edited",
                {"status": status.value},
            )
        if not stretches.is_split(conn, run_id) or opa_runs.job(conn, run_id) is not None:
            raise GatehouseError(
                ErrorCode.RUN_NOT_AWAITING_APPROVAL,
                f"run {run_id!r} cannot take an edit (an OPA run, or one begun before runs"
                " were split); approve or reject it",
            )
        if card.plan_digest != body.previous_digest:
            raise GatehouseError(
                ErrorCode.STALE_PLAN_DIGEST,
                "the edit names a plan digest that is not this run's plan",
                {"given": body.previous_digest, "current": card.plan_digest},
            )
        profile = catalog.profile(parent.policy_profile).model
        refuse_a_party(conn, run_id, profile, parent.submitted_by, who)
        refuse_if_expired(run_id, locked.wait)  # an expired plan takes no edit, as no decision
        request = _edited_request(parent, body)
        check_intent(request)  # the gate, the budgets: as for any intent
        on_record = approvals.insert_decision(
            conn,
            run_id=run_id,
            plan_digest=body.previous_digest,
            decision=Decision.REJECTED,
            decided_by=who.name,
            comment=f"edited into run {new_id}" + (f": {body.comment}" if body.comment else ""),
            token_id=who.token_id,
        )
        if not on_record.inserted:
            raise GatehouseError(
                ErrorCode.ALREADY_DECIDED,
                f"this plan was already {on_record.decision.value} by {on_record.decided_by}",
                {"decision": on_record.decision.value, "decided_by": on_record.decided_by},
            )
        service.hand_off(conn, run_id, locked=locked)
        intent_id = "int_" + uuid.uuid4().hex
        intents.insert_intent_and_run(
            conn, intent_id=intent_id, run_id=new_id, request=request, idempotency_key=None
        )
        edits.insert_edit(conn, new_id, edits.Edit(run_id, body.previous_digest, who.name))
        job = IntentJob(run_id=new_id, intent_id=intent_id, request=request, stretched=True)
        service.queue_run(conn, job, request.submitted_by)
    return PlanEditAccepted(
        run_id=new_id,
        parent_run_id=run_id,
        previous_digest=body.previous_digest,
        plan_digest=new_digest,
        edited_by=who.name,
        links=run_links(new_id),
    )
