"""What the shim does, one method per route: validate, write, enqueue, read.

The shim never runs a workflow. It reaches workers only through the
database: intent and run rows plus the queue entry commit in one
transaction (``DBOSClient.enqueue_in_transaction``); a decision is a
``plan_approvals`` row, then a ``send`` that wakes the waiting workflow.
"""

from __future__ import annotations

import time
import uuid
from typing import TypeVar

from dbos import DBOS, DBOSClient, SetWorkflowID, WorkflowHandle
from dbos._serialization import DBOSPortableJSON
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from contracts import (
    APPROVAL_TOPIC,
    INTENT_QUEUE,
    INTENT_WORKFLOW,
    REPLAY_WORKFLOW,
    RESOLUTION_TOPIC,
    ApprovalRequest,
    CallResolution,
    CallResolved,
    CallView,
    CancelAccepted,
    CancelRequest,
    Decision,
    DecisionAccepted,
    EpisodeView,
    ErrorCode,
    ForkAccepted,
    ForkRequest,
    GatehouseError,
    IntentAccepted,
    IntentJob,
    IntentRequest,
    JsonObject,
    JsonValue,
    Mode,
    Plan,
    ReplayReport,
    Role,
    RunList,
    RunStatus,
    RunView,
    digest_of,
    validate_instance,
)
from ledger import (
    Database,
    approvals,
    calls,
    chain,
    evidence,
    forks,
    intents,
    migrate,
    now_iso,
    opa_runs,
    open_database,
    plan_cards,
    runs,
)
from policies import catalog
from policies.episodes import episode, security_episode
from policies.gate import gate_plan
from policies.templates import compile_template
from shim._auth import Identity
from shim._cancel import cancel_run, refuse_if_cancelled
from shim.settings import ShimSettings

__all__ = ["Service"]


def run_links(run_id: str) -> dict[str, str]:
    return {
        "self": f"/runs/{run_id}",
        "approve": f"/approve/{run_id}",
        "reject": f"/reject/{run_id}",
        "cancel": f"/runs/{run_id}/cancel",
        "ledger": f"/runs/{run_id}/ledger",
        "episodes": f"/runs/{run_id}/episodes",
        "artifacts": f"/runs/{run_id}/artifacts",
    }


def _check_intent(request: IntentRequest) -> None:
    """Everything that can be refused before anything is written."""
    recipe = catalog.recipe(request.recipe).model
    profile = catalog.profile(request.policy_profile).model
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


# Answers that are not refusals of anything: nothing to record.
_NOT_REFUSALS = frozenset(
    {
        ErrorCode.NOT_FOUND,
        ErrorCode.RUN_NOT_FOUND,
        ErrorCode.ARTIFACT_NOT_FOUND,
        ErrorCode.CALL_NOT_FOUND,
        ErrorCode.OPA_OUTPUT_UNAVAILABLE,  # a run's output archive not there (yet): refused nothing
        ErrorCode.METHOD_NOT_ALLOWED,
        ErrorCode.DATABASE_UNAVAILABLE,
        ErrorCode.INTERNAL_ERROR,
        # The model failed an explain: recorded in the ledger and as an episode, refused nothing.
        ErrorCode.EXPLAIN_UNAVAILABLE,
        ErrorCode.EXPLAIN_INVALID,
    }
)

M = TypeVar("M", IntentRequest, ApprovalRequest, CallResolution, ForkRequest)

# How long POST /runs/{id}/replay waits for a worker to answer.
_REPLAY_WAIT_S = 60.0


def _as(model: M, field: str, who: Identity) -> M:
    """The acting identity is the token's: a body may repeat it, never name another."""
    if field in model.model_fields_set and getattr(model, field) != who.name:
        raise GatehouseError(
            ErrorCode.FORBIDDEN,
            f"{field} names {getattr(model, field)!r} but the token belongs to {who.name!r}",
        )
    return model.model_copy(update={field: who.name})


def _not_awaiting(run_id: str, status: RunStatus) -> GatehouseError:
    return GatehouseError(
        ErrorCode.RUN_NOT_AWAITING_APPROVAL,
        f"run {run_id!r} is {status.value}; it takes no decision",
        {"status": status.value},
    )


def _answer(
    run_id: str, body: ApprovalRequest, decision: Decision, on_record: approvals.Decided
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
    )


class Service:
    def __init__(self, settings: ShimSettings) -> None:
        self.settings = settings
        self.db: Database = open_database(settings.database_url)
        # Either process may be first on a fresh database: the shim creates the
        # tables it writes and the DBOS system tables it enqueues into.
        migrate(self.db)
        DBOS.migrate(settings.database_url)
        self.client = DBOSClient(
            system_database_url=settings.database_url, serializer=DBOSPortableJSON
        )

    def close(self) -> None:
        self.client.destroy()
        self.db.dispose()

    def healthy(self) -> bool:
        with self.db.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True

    # ------------------------------------------------------------ intents
    def submit(
        self,
        request: IntentRequest,
        idempotency_key: str | None,
        who: Identity,
        opa: opa_runs.Intake | None = None,
    ) -> tuple[bool, IntentAccepted]:
        """Store and enqueue an intent; (created, answer). A repeated key returns its run.
        ``opa``: the validated archive the intent was made from, stored with the run."""
        request = _as(request, "submitted_by", who)
        if idempotency_key is not None:
            existing = self._existing(request, idempotency_key)
            if existing is not None:
                return False, existing
        _check_intent(request)
        run_id = "run_" + uuid.uuid4().hex
        intent_id = "int_" + uuid.uuid4().hex
        opa_job = None if opa is None else opa.job
        job = IntentJob(run_id=run_id, intent_id=intent_id, request=request, opa=opa_job)
        try:
            with self.db.engine.begin() as conn:
                intents.insert_intent_and_run(
                    conn,
                    intent_id=intent_id,
                    run_id=run_id,
                    request=request,
                    idempotency_key=idempotency_key,
                )
                if opa is not None:
                    opa_runs.put_input(conn, run_id, opa)
                self.client.enqueue_in_transaction(
                    conn,
                    {
                        "workflow_name": INTENT_WORKFLOW,
                        "queue_name": INTENT_QUEUE,
                        "workflow_id": run_id,
                        "app_version": self.settings.app_version,
                    },
                    job.model_dump(mode="json"),
                )
        except IntegrityError:
            # Two requests with one Idempotency-Key raced; the other one won.
            if idempotency_key is None:
                raise
            existing = self._existing(request, idempotency_key)
            if existing is None:
                raise
            return False, existing
        return True, IntentAccepted(
            run_id=run_id,
            intent_id=intent_id,
            status=RunStatus.QUEUED.value,
            links=run_links(run_id),
        )

    def _existing(self, request: IntentRequest, key: str) -> IntentAccepted | None:
        with self.db.engine.connect() as conn:
            found = intents.find_by_idempotency_key(conn, key)
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

    # ------------------------------------------------------------ decisions
    def decide(
        self, run_id: str, body: ApprovalRequest, decision: Decision, who: Identity
    ) -> DecisionAccepted:
        body = _as(body, "decided_by", who)
        with self.db.engine.begin() as conn:
            refuse_if_cancelled(conn, self.client, run_id)  # first: cancel and decision race here
            status = runs.run_status(conn, run_id)
            if status is None:
                raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
            request = intents.request_for_run(conn, run_id)
            if request is None or request.mode is Mode.PLAN_ONLY:
                raise _not_awaiting(run_id, status)
            profile = catalog.profile(request.policy_profile).model
            if profile.approval.four_eyes and request.submitted_by == who.name:
                raise GatehouseError(
                    ErrorCode.FOUR_EYES,
                    f"{who.name} submitted run {run_id!r} and may not decide on its plan",
                    {"profile_id": profile.profile_id},
                )
            card = plan_cards.get_plan_card(conn, run_id)
            if card is not None:
                expected = card.plan_digest
            elif request.plan is not None:
                # run-plan: the plan is known before the worker gets to it, so a
                # decision may arrive before the plan card does.
                expected = digest_of(request.plan.model_dump(mode="json"))
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
            # The plan's decision keeps its answer after the run moved on: a repeat
            # is a repeat and an opposite decision is already_decided, however late.
            on_record = approvals.decision_for(conn, run_id, body.plan_digest)
            if on_record is None:
                if status.terminal:
                    raise _not_awaiting(run_id, status)
                on_record = approvals.insert_decision(
                    conn,
                    approval_id="apr_" + uuid.uuid4().hex,
                    run_id=run_id,
                    plan_digest=body.plan_digest,
                    decision=decision,
                    decided_by=body.decided_by,
                    comment=body.comment,
                )
        answer = _answer(run_id, body, decision, on_record)
        if status.terminal:
            return answer  # nothing waits for it any more
        # The row is the authority; this only wakes the waiting workflow now
        # rather than at its next re-check. Repeats are de-duplicated by key.
        self.client.send(
            run_id,
            {"plan_digest": body.plan_digest, "decision": decision.value},
            APPROVAL_TOPIC,
            idempotency_key=f"{run_id}:{body.plan_digest}",
        )
        return answer

    def cancel(self, run_id: str, body: CancelRequest, who: Identity) -> CancelAccepted:
        """Cancel a run (its submitter or an operator); see ``shim._cancel``."""
        return cancel_run(self.db, self.client, run_id, body, who)

    # ------------------------------------------------------------ operators
    def resolve(self, op_key: str, body: CallResolution, who: Identity) -> CallResolved:
        """An operator's word on an in-doubt call; the waiting run continues."""
        body = _as(body, "resolved_by", who)
        with self.db.engine.begin() as conn:
            row, recorded = calls.resolve(
                conn, key=op_key, outcome=body.outcome, resolved_by=who.name, note=body.note
            )
            if not recorded and row.status != body.outcome:
                raise GatehouseError(
                    ErrorCode.CALL_NOT_IN_DOUBT,
                    f"call {op_key[:12]} is {row.status}; only an in-doubt call is resolved",
                    {"status": row.status},
                )
            if recorded:
                evidence.put_episode(
                    conn,
                    row.run_id,
                    row.step_id,
                    episode(
                        run_id=row.run_id,
                        kind="resolution",
                        subject=op_key,
                        episode_type="execution/operator_resolution",
                        status="completed",
                        summary=f"in-doubt call of step {row.step_id} resolved as"
                        f" {body.outcome} by {who.name}",
                        executor_id=who.name,
                        recorded_at=now_iso(),
                        details={
                            "op_key": op_key,
                            "step_id": row.step_id,
                            "outcome": body.outcome,
                            "resolved_by": who.name,
                            "note": body.note,
                        },
                    ),
                )
        self.client.send(
            row.run_id,
            {"op_key": op_key, "outcome": body.outcome},
            RESOLUTION_TOPIC,
            idempotency_key=f"{op_key}:resolution",
        )
        return CallResolved(
            op_key=op_key,
            run_id=row.run_id,
            step_id=row.step_id,
            outcome=body.outcome,
            resolved_by=who.name,
            recorded=recorded,
        )

    def replay(self, run_id: str) -> ReplayReport:
        """Ask a worker to replay a finished run from its ledger, and wait for the report."""
        with self.db.engine.connect() as conn:
            status = runs.run_status(conn, run_id)
        if status is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        if not status.terminal:
            raise GatehouseError(
                ErrorCode.RUN_NOT_FINISHED,
                f"run {run_id!r} is {status.value}; only a finished run can be replayed",
                {"status": status.value},
            )
        handle: WorkflowHandle[JsonValue] = self.client.enqueue(
            {
                "workflow_name": REPLAY_WORKFLOW,
                "queue_name": INTENT_QUEUE,
                "workflow_id": f"replay_{run_id}_{uuid.uuid4().hex[:12]}",
                "app_version": self.settings.app_version,
            },
            run_id,
        )
        deadline = time.monotonic() + _REPLAY_WAIT_S
        while time.monotonic() < deadline:
            if handle.get_status().status in ("SUCCESS", "ERROR"):
                break
            time.sleep(0.1)
        else:
            self.client.cancel_workflow(handle.get_workflow_id())
            raise GatehouseError(
                ErrorCode.NO_WORKER, f"no worker replayed run {run_id!r} in {_REPLAY_WAIT_S:.0f} s"
            )
        answer = handle.get_result()
        if not isinstance(answer, dict):
            raise GatehouseError(ErrorCode.INTERNAL_ERROR, "the replay answered nothing")
        if "error" in answer:
            err = answer["error"]
            code = err.get("code") if isinstance(err, dict) else None
            message = err.get("message") if isinstance(err, dict) else None
            raise GatehouseError(ErrorCode(str(code)), str(message))
        return ReplayReport.model_validate(answer.get("report"))

    def fork(self, run_id: str, body: ForkRequest, who: Identity) -> ForkAccepted:
        """A new run: the parent's results before plan step ``from_step``, live after."""
        body = _as(body, "requested_by", who)
        with self.db.engine.connect() as conn:
            parent = runs.get_run(conn, run_id, run_links(run_id))
        if parent is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        if not parent.status.terminal:
            raise GatehouseError(
                ErrorCode.RUN_NOT_FINISHED,
                f"run {run_id!r} is {parent.status.value}; fork a finished run",
                {"status": parent.status.value},
            )
        approved = [a for a in parent.approvals if a.decision is Decision.APPROVED]
        if parent.plan_card is None or not approved:
            raise GatehouseError(
                ErrorCode.FORK_STEP_INVALID, f"run {run_id!r} never had an approved plan to fork"
            )
        steps = parent.plan_card.plan.steps
        if body.from_step > len(steps):
            raise GatehouseError(
                ErrorCode.FORK_STEP_INVALID,
                f"the plan of run {run_id!r} has {len(steps)} step(s); there is no step"
                f" {body.from_step}",
            )
        step_id = steps[body.from_step - 1].step_id
        start = self._call_function_id(run_id, step_id)
        new_id = "run_" + uuid.uuid4().hex
        with self.db.engine.begin() as conn:
            forks.insert_fork(
                conn,
                parent_run_id=run_id,
                run_id=new_id,
                from_step=body.from_step,
                requested_by=who.name,
            )
            evidence.put_episode(
                conn,
                new_id,
                None,
                episode(
                    run_id=new_id,
                    kind="fork",
                    subject=run_id,
                    episode_type="execution/fork",
                    status="completed",
                    summary=f"forked from run {run_id} at step {body.from_step} ({step_id})"
                    f" by {who.name}",
                    executor_id=who.name,
                    recorded_at=now_iso(),
                    details={
                        "parent_run_id": run_id,
                        "from_step": body.from_step,
                        "step_id": step_id,
                        "requested_by": who.name,
                    },
                ),
            )
        # The fork replays the parent's recorded steps, so it runs under the
        # application version the parent ran under, never another.
        version = self.client.retrieve_workflow(run_id).get_status().app_version
        with SetWorkflowID(new_id):
            self.client.fork_workflow(
                run_id,
                start,
                application_version=version or self.settings.app_version,
                queue_name=INTENT_QUEUE,
            )
        return ForkAccepted(
            run_id=new_id,
            parent_run_id=run_id,
            from_step=body.from_step,
            status=RunStatus.QUEUED.value,
            links=run_links(new_id),
        )

    def _call_function_id(self, run_id: str, step_id: str) -> int:
        """The DBOS step number of the parent's first tool call for ``step_id``."""
        for info in self.client.list_workflow_steps(run_id):
            output = info.get("output")
            if (
                info.get("function_name") == "gatehouse.tool_call"
                and isinstance(output, dict)
                and output.get("step_id") == step_id
            ):
                return int(info["function_id"])
        raise GatehouseError(
            ErrorCode.FORK_STEP_INVALID,
            f"run {run_id!r} never reached step {step_id!r}; fork from an earlier step",
        )

    # ------------------------------------------------------------ reads
    def run(self, run_id: str, who: Identity | None = None) -> RunView:
        """One run. A submitter sees only its own runs; approvers and operators see all."""
        with self.db.engine.connect() as conn:
            view = runs.get_run(conn, run_id, run_links(run_id))
        if view is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        privileged = who is None or who.has(Role.OPERATOR, Role.APPROVER)
        if not privileged and who is not None and view.submitted_by != who.name:
            raise GatehouseError(
                ErrorCode.FORBIDDEN, f"{who.name} may read only the runs it submitted"
            )
        return view

    def runs(self, status: RunStatus | None, limit: int, cursor: str | None) -> RunList:
        with self.db.engine.connect() as conn:
            found = runs.list_runs(conn, status, limit + 1, cursor)
        more = len(found) > limit
        page = found[:limit]
        nxt = f"{page[-1].created_at}|{page[-1].run_id}" if more and page else None
        return RunList(runs=page, next_cursor=nxt)

    def _exists(self, conn: Connection, run_id: str) -> None:
        if runs.run_status(conn, run_id) is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")

    def ledger(self, run_id: str) -> list[CallView]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return calls.list_calls(conn, run_id)

    def verify_ledger(self, run_id: str) -> JsonObject:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return chain.verify(conn, run_id).to_json()

    def episodes(self, run_id: str) -> list[EpisodeView]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return evidence.list_episodes(conn, run_id)

    def artifacts(self, run_id: str) -> list[dict[str, str | int]]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return evidence.run_artifacts(conn, run_id)

    def security_events(self, limit: int) -> list[JsonObject]:
        with self.db.engine.connect() as conn:
            return evidence.list_security_events(conn, limit)

    def record_refusal(
        self, exc: GatehouseError, who: str | None, route: str, run_id: str | None
    ) -> None:
        """Every refused request leaves a MOVA security episode (not found is no refusal)."""
        if exc.code in _NOT_REFUSALS:
            return
        now = now_iso()
        episode = security_episode(
            run_id=run_id,
            subject=f"request:{uuid.uuid4().hex}",
            code=exc.code,
            message=exc.message,
            executor_id="gatehouse-shim",
            recorded_at=now,
            details={"route": route, "identity": who, "refusal": exc.details},
        )
        with self.db.engine.begin() as conn:
            evidence.put_security_event(
                conn,
                episode_id=episode.episode_id,
                run_id=run_id,
                error_code=exc.code.value,
                category=episode.security_event_category,
                severity=episode.severity,
                body=episode.model_dump(mode="json"),
                recorded_at=now,
            )

    def artifact(self, digest: str) -> tuple[str, bytes]:
        with self.db.engine.connect() as conn:
            found = evidence.get_artifact(conn, digest)
        if found is None:
            raise GatehouseError(ErrorCode.ARTIFACT_NOT_FOUND, f"no artifact {digest}")
        return found
