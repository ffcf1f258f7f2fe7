"""The workflows a worker runs, registered with DBOS from one explicit list.

* ``gatehouse.intent`` — one run: ``worker.flow`` through the live ports. The
  run id is the workflow id. A fork (``DBOS.fork_workflow``) runs its parent's
  job under a new workflow id: DBOS serves the parent's recorded planner and
  tool calls before the fork point, and from there on every call and record is
  the fork's own;
* ``gatehouse.replay`` — a finished run replayed from its ledger, for the shim;
* ``gatehouse.explain`` — a model's report on a finished run, for the shim.

Each takes one JSON input; the shim enqueues them by name.
"""

from __future__ import annotations

from collections.abc import Callable

from dbos import DBOS

from contracts import (
    EXPLAIN_WORKFLOW,
    INTENT_WORKFLOW,
    REPLAY_WORKFLOW,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
)
from ledger import runs, storage_full
from worker.durable._calls import explain_call, replay_call
from worker.durable._live import LivePorts
from worker.flow import run_intent
from worker.runtime import annotate, runtime, stranded

__all__ = ["WORKFLOWS", "explain_workflow", "intent_workflow", "register", "replay_workflow"]


def intent_workflow(raw_job: JsonObject) -> JsonObject:
    job = IntentJob.model_validate(raw_job)
    run_id = DBOS.workflow_id or job.run_id
    annotate(run_id=run_id)
    if run_id != job.run_id:
        _registered_fork(run_id)
    try:
        return run_intent(job, run_id, LivePorts())
    except Exception as exc:
        if storage_full(exc):
            stranded(run_id)  # resumed from its checkpoints once space is freed
        raise


def _registered_fork(workflow_id: str) -> None:
    """A workflow running another run's job is a fork; Gatehouse's own forks
    (``gatehouse fork``) write their run first. One made behind Gatehouse's back
    (``dbos workflow fork``) has no run: no approval, ledger or evidence would
    hold what it did, so it ends in DBOS ``ERROR`` before doing anything.
    Not a step: a run row, once written, is never deleted, so every execution
    reads the same answer."""
    with runtime().db.engine.connect() as conn:
        known = runs.run_status(conn, workflow_id) is not None
    if not known:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FOUND,
            f"workflow {workflow_id} has no Gatehouse run: a fork made through DBOS is"
            " refused; fork with `gatehouse runs fork RUN_ID --from-step N`",
        )


def replay_workflow(run_id: str, rules: str = "recorded") -> JsonObject:
    """A replay asked for through the queue (POST /runs/{id}/replay)."""
    return replay_call(run_id, rules)


def explain_workflow(run_id: str) -> JsonObject:
    """An explain asked for through the queue (GET /runs/{id}/explain)."""
    return explain_call(run_id)


# Every workflow a worker serves, by its durable name: the only registration.
WORKFLOWS: tuple[tuple[str, Callable[..., JsonObject]], ...] = (
    (INTENT_WORKFLOW, intent_workflow),
    (REPLAY_WORKFLOW, replay_workflow),
    (EXPLAIN_WORKFLOW, explain_workflow),
)

_registered: list[str] = []


def register() -> None:
    """Register ``WORKFLOWS`` with DBOS, once per process (before ``DBOS.launch``)."""
    if _registered:
        return
    for name, fn in WORKFLOWS:
        DBOS.workflow(name=name)(fn)
        _registered.append(name)
