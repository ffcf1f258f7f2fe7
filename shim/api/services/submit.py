"""Taking an intent: everything that can be refused from the intent alone is refused
before anything is written; then the intent and run rows and the queue entry commit in
one transaction (``DBOSClient.enqueue_in_transaction``). A repeated ``Idempotency-Key``
returns its run. A full queue refuses (503 ``overloaded``, 429
``queue_share_exceeded``): the backlog is counted by the statement that writes the rows,
and the refusal rolls the transaction back, so nothing stays and no worker is told.
"""

from __future__ import annotations

import uuid

from sqlalchemy.exc import IntegrityError

from contracts import (
    Episode,
    ErrorCode,
    GatehouseError,
    IntentAccepted,
    IntentJob,
    IntentRequest,
    Plan,
    RunStatus,
    new_run_id,
    queue_partition,
    validate_instance,
)
from ledger import Database, evidence, intents, now_iso, opa_runs
from policies import catalog, cedar_gate
from policies.episodes import episode
from policies.gate import gate_plan
from policies.templates import compile_template
from shim.api.services.acting import acting_as, run_links
from shim.api.services.core import Service
from shim.api.services.health import planner_missing
from shim.settings import ShimSettings
from shim.tokens import Identity

__all__ = ["submit"]


def check_intent(request: IntentRequest) -> None:
    """Everything that can be refused before anything is written."""
    recipe = catalog.recipe(request.recipe).model
    # Cedar's requests are made for the submitter (policies/cedar_gate.py).
    profile = cedar_gate.bound(catalog.profile(request.policy_profile).model, request.submitted_by)
    pool = catalog.tool_pool(request.tool_pool).model
    catalog.check_parameters(recipe, request.parameters)
    profile.budgets.narrowed(request.budgets)  # budget_widened: ask for less, never more
    if request.plan is not None:
        gate_plan(request.plan, pool, profile)
    elif recipe.planner == "template":
        # A template compiles the same way here as in the worker, so a plan
        # that would be refused is refused now, with nothing written.
        raw = compile_template(recipe, request.objective, request.parameters)
        validate_instance("env.mova_agent_plan_v1", raw, ErrorCode.PLAN_INVALID)
        gate_plan(Plan.model_validate(raw), pool, profile)


def _archive_episode(run_id: str, opa: opa_runs.Intake, who: Identity) -> Episode:
    """The run's evidence of where its objective came from: which archive, signed by whom."""
    signer = opa.signer
    by = "unsigned" if signer is None else f"signed by {signer.subject}"
    return episode(
        run_id=run_id,
        kind="opa_archive",
        subject=opa.job.archive_sha256,
        episode_type="execution/opa_archive",
        status="completed",
        summary=f"submitted as OPA archive {opa.job.archive_name} ({by}) by {who.name}",
        executor_id=who.name,
        recorded_at=now_iso(),
        details={
            "archive_name": opa.job.archive_name,
            "archive_sha256": opa.job.archive_sha256,
            "opa_version": opa.job.opa_version,
            "execution_mode": opa.job.execution_mode,
            "signer": None if signer is None else signer.model_dump(mode="json"),
        },
    )


def submit(
    service: Service,
    request: IntentRequest,
    *,
    key: str | None,
    who: Identity,
    opa: opa_runs.Intake | None = None,
) -> tuple[bool, IntentAccepted]:
    """Store and enqueue an intent; (created, answer). A repeated key returns its run.
    ``opa``: the validated archive the intent was made from, stored with the run."""
    db, settings = service.db, service.settings
    request = acting_as(request, "submitted_by", who)
    if key is not None:
        existing = _existing(db, request, key)
        if existing is not None:
            return False, existing
    check_intent(request)
    if request.plan is None:  # a refusal that can be known now happens now
        planner = catalog.recipe(request.recipe).model.planner
        s = settings
        missing = planner_missing(db, s.app_version, s.dead_after_s, request.recipe, planner)
        if missing is not None:
            raise missing
    run_id = new_run_id()
    intent_id = "int_" + uuid.uuid4().hex
    opa_job = None if opa is None else opa.job
    job = IntentJob(
        run_id=run_id, intent_id=intent_id, request=request, opa=opa_job, stretched=True
    )
    try:
        with db.engine.begin() as conn:
            # The rows, the workers told at commit, and the backlog the run joins; no
            # room, and the refusal rolls it all back: nothing written, no one told.
            backlog = intents.take_intent(
                conn,
                intent_id=intent_id,
                run_id=run_id,
                request=request,
                idempotency_key=key,
                partition=queue_partition(request.submitted_by),
            )
            _refuse_if_full(settings, request.submitted_by, *backlog)
            if opa is not None:
                opa_runs.put_input(conn, run_id, opa)
                evidence.put_episode(conn, run_id, None, _archive_episode(run_id, opa, who))
            service.queue_run(conn, job, request.submitted_by, notify=False)
    except IntegrityError:
        # Two requests with one Idempotency-Key raced; the other one won.
        if key is None:
            raise
        existing = _existing(db, request, key)
        if existing is None:
            raise
        return False, existing
    return True, IntentAccepted(
        run_id=run_id,
        intent_id=intent_id,
        status=RunStatus.QUEUED.value,
        links=run_links(run_id),
    )


def _refuse_if_full(settings: ShimSettings, submitter: str, total: int, theirs: int) -> None:
    """Refuse an intent the queue has no room for (``total`` runs queued before it,
    ``theirs`` of them its submitter's): past ``max_queued`` runs for everyone (503),
    past ``max_queued_per_submitter`` for this submitter (429), so one submitter cannot
    fill the queue for the others. Counted, not locked: concurrent submissions may
    pass the bound by a few."""
    s = settings
    if theirs >= s.max_queued_per_submitter:
        raise GatehouseError(
            ErrorCode.QUEUE_SHARE_EXCEEDED,
            f"{submitter} has {theirs} runs queued; one submitter may have"
            f" {s.max_queued_per_submitter}",
            {"queued": theirs, "limit": s.max_queued_per_submitter, "retry_after_s": 5},
        )
    if total >= s.max_queued:
        raise GatehouseError(
            ErrorCode.OVERLOADED,
            f"{total} runs are queued; this deployment takes {s.max_queued}",
            {"queued": total, "limit": s.max_queued, "retry_after_s": 5},
        )


def _existing(db: Database, request: IntentRequest, key: str) -> IntentAccepted | None:
    with db.engine.connect() as conn:
        found = intents.find_by_idempotency_key(conn, request.submitted_by, key)
    if found is None:
        return None
    if found.request_digest != intents.request_digest(request):
        raise GatehouseError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "this Idempotency-Key was already used for a different intent",
            {"run_id": found.run_id},
        )
    return IntentAccepted(
        run_id=found.run_id,
        intent_id=found.intent_id,
        status=found.status,
        links=run_links(found.run_id),
    )
