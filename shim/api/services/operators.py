"""What operators ask of runs: resolve an in-doubt call, replay a run, fork one."""

from __future__ import annotations

import time
import uuid

from dbos import WorkflowHandle
from sqlalchemy.engine import Connection

from contracts import (
    REPLAY_WORKFLOW,
    RESOLUTION_TOPIC,
    CallResolution,
    CallResolved,
    Decision,
    ErrorCode,
    ForkAccepted,
    ForkRequest,
    GatehouseError,
    IntentJob,
    JsonValue,
    ReplayReport,
    RunStatus,
    new_run_id,
    queue_partition,
)
from ledger import (
    calls,
    evidence,
    forks,
    intents,
    now_iso,
    opa_runs,
    run_views,
    runs,
    work_queue,
)
from policies.episodes import episode
from shim.api.services.acting import acting_as, run_links
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["fork", "replay", "resolve"]

# How long POST /runs/{id}/replay waits for a worker to answer.
_REPLAY_WAIT_S = 60.0


def resolve(service: Service, op_key: str, body: CallResolution, who: Identity) -> CallResolved:
    """An operator's word on an in-doubt call; the waiting run continues."""
    db, client = service.db, service.client
    body = acting_as(body, "resolved_by", who)
    with db.engine.begin() as conn:
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
        split = service.hand_off(conn, row.run_id)
    if not split:  # a run from before the split waits in place: wake it
        client.send(
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


def replay(service: Service, run_id: str, who: Identity, rules: str = "recorded") -> ReplayReport:
    """Ask a worker to replay a finished run from its ledger, and wait for the report
    (queued in the partition of ``who``, who asked)."""
    db, client, settings = service.db, service.client, service.settings
    with db.engine.connect() as conn:
        status = runs.run_status(conn, run_id)
    if status is None:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    if not status.terminal:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FINISHED,
            f"run {run_id!r} is {status.value}; only a finished run can be replayed",
            {"status": status.value},
        )
    partition = queue_partition(who.name)
    handle: WorkflowHandle[JsonValue] = client.enqueue(
        work_queue.enqueue_options(
            REPLAY_WORKFLOW,
            f"replay_{run_id}_{uuid.uuid4().hex[:12]}",
            settings.app_version,
            partition,
        ),
        run_id,
        rules,
    )
    service.work_queued(partition)
    deadline = time.monotonic() + _REPLAY_WAIT_S
    while time.monotonic() < deadline:
        if handle.get_status().status in ("SUCCESS", "ERROR"):
            break
        time.sleep(0.1)
    else:
        client.cancel_workflow(handle.get_workflow_id())
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


def fork(service: Service, run_id: str, *, body: ForkRequest, who: Identity) -> ForkAccepted:
    """A new run: the parent's results before plan step ``from_step``, live after."""
    db = service.db
    body = acting_as(body, "requested_by", who)
    with db.engine.connect() as conn:
        parent = run_views.get_run(conn, run_id, run_links(run_id))
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
    new_id = new_run_id()
    with db.engine.begin() as conn:
        if not any(c.step_id == step_id for c in calls.of_runs(conn, [run_id]).values()):
            raise GatehouseError(
                ErrorCode.FORK_STEP_INVALID,
                f"run {run_id!r} never reached step {step_id!r}; fork from an earlier step",
            )
        job = _parent_job(conn, run_id, new_id, body.from_step)
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
        # A run of its own: it gates the parent's plan again and waits on its own
        # plan card for someone other than its requester and the parent's submitter.
        service.queue_run(conn, job, who.name)
    return ForkAccepted(
        run_id=new_id,
        parent_run_id=run_id,
        from_step=body.from_step,
        status=RunStatus.QUEUED.value,
        links=run_links(new_id),
    )


def _parent_job(conn: Connection, forked_from: str, run_id: str, from_step: int) -> IntentJob:
    """The parent's job under the fork's run id (the archive is the first one up
    the lineage: a fork of a fork runs the first run's)."""
    request = intents.request_for_run(conn, forked_from)
    lineage = forks.lineage(conn, forked_from)
    if request is None or lineage is None:
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, f"run {forked_from!r} has no intent")
    opa = None
    up: forks.Lineage | None = lineage
    while up is not None and opa is None:
        opa = opa_runs.job(conn, up.run_id)
        up = None if up.parent_run_id is None else forks.lineage(conn, up.parent_run_id)
    return IntentJob(
        run_id=run_id,
        intent_id=lineage.intent_id,
        request=request,
        opa=opa,
        stretched=True,
        fork_from_step=from_step,
    )
