"""The workflows a worker runs, registered with DBOS from one explicit list.

* ``gatehouse.intent`` — a run's first stretch: ``worker.flow`` through the
  live ports, from compile to the first decision nobody has made yet (where
  the run parks and the workflow ends) or to the run's end. The run id is the
  workflow id. A fork (``gatehouse runs fork``) is a run of its own, started
  here like any other: its parent's calls before the fork point are answered
  from the parent's ledger, and it parks at its own plan card;
* ``gatehouse.stretch`` — a later stretch (workflow id ``RUN_ID:N``), enqueued
  in the transaction that wrote the decision it picks up from: the flow from
  that decision, as the continuation the park wrote says; after another kind of
  wait (an input, a call in doubt), the flow again from the start, answered from
  the ledger up to that wait, live after it;
* ``gatehouse.replay`` — a finished run replayed from its ledger, for the shim;
* ``gatehouse.explain`` — a model's report on a finished run, for the shim.

Each takes one JSON input; the shim enqueues them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dbos import DBOS

from contracts import (
    EXPLAIN_WORKFLOW,
    INTENT_WORKFLOW,
    REPLAY_WORKFLOW,
    STRETCH_WORKFLOW,
    Continuation,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    StretchJob,
)
from ledger import runs, storage_full
from worker.durable._calls import explain_call, replay_call
from worker.durable._live import LivePorts
from worker.durable._stretch import stretch_ports
from worker.durable._tx import begin_records, steady
from worker.flow import Parked, Ports, resume_intent, run_intent
from worker.replay import lineage_chain, recorded_job
from worker.runtime import annotate, runtime, stranded

__all__ = [
    "WORKFLOWS",
    "explain_workflow",
    "intent_workflow",
    "register",
    "replay_workflow",
    "stretch_workflow",
]


def intent_workflow(raw_job: JsonObject) -> JsonObject:
    begin_records()
    job = IntentJob.model_validate(raw_job)
    run_id = DBOS.workflow_id or job.run_id
    annotate(run_id=run_id)
    if run_id != job.run_id:
        _registered_fork(run_id)
    # A job enqueued before runs were split waits in place to its end, as it always did.
    ports: Ports = (
        stretch_ports(run_id, None, fork_from=job.fork_from_step) if job.stretched else LivePorts()
    )
    return _stretch(job, run_id, ports)


def stretch_workflow(raw: JsonObject) -> JsonObject:
    """A stretch after a wait: from the decision it parked at, as its continuation
    says (since gatehouse-7); after any other wait, the run's job, rebuilt from its
    rows, from the start (until gatehouse-6 the job was the step ``gatehouse.stretch_job``)."""
    begin_records()
    resume = StretchJob.model_validate(raw)
    annotate(run_id=resume.run_id)
    expected = f"{resume.run_id}:{resume.stretch}"
    if DBOS.workflow_id != expected:
        # Only a hand-off names a stretch; a copy of one (``dbos workflow fork``)
        # would re-run a run's stretch under an id no row knows of.
        raise GatehouseError(
            ErrorCode.RUN_NOT_FOUND,
            f"workflow {DBOS.workflow_id} has no Gatehouse run: it copies stretch {expected};"
            " a fork made through DBOS is refused; fork with"
            " `gatehouse runs fork RUN_ID --from-step N`",
        )
    if resume.continuation is not None:
        # Everything the stretch needs was written with the park: no row is read first.
        then = Continuation.model_validate(resume.continuation)
        ports = stretch_ports(resume.run_id, resume, fork_from=then.fork_from_step)
        return _parked_or_ended(resume.run_id, lambda: resume_intent(then, resume.run_id, ports))
    db = runtime().db
    # Rows that never change once the run began (its lineage, its intent, its archive):
    # read in the body, every execution reads the same, so no DBOS step holds them.
    chain = steady(lambda: lineage_chain(db, resume.run_id))
    job = steady(lambda: recorded_job(db, chain, stretched=True))
    return _stretch(job, resume.run_id, stretch_ports(resume.run_id, resume, chain=chain))


def _stretch(job: IntentJob, run_id: str, ports: Ports) -> JsonObject:
    return _parked_or_ended(run_id, lambda: run_intent(job, run_id, ports))


def _parked_or_ended(run_id: str, flow: Callable[[], JsonObject]) -> JsonObject:
    """A stretch's flow, to the run's end or to where it parks."""
    try:
        with _noted_if_the_disk_fills(run_id):
            return flow()
    except Parked as parked:
        # Waiting is data: the run's row says where it waits; this workflow is done.
        return {"run_id": run_id, "status": "parked", "at": parked.at, "wait": parked.wait}


@contextmanager
def _noted_if_the_disk_fills(run_id: str) -> Iterator[None]:
    """A checkpoint DBOS writes itself that finds the disk full ends the workflow, and
    DBOS cannot record that on the same disk: noted (``stranded``), the workflow is
    resumed from its checkpoints once space is freed. Noted by this workflow's own id,
    which for a later stretch is RUN_ID:N, not the run's first (RUN_ID)."""
    try:
        yield
    except Exception as exc:
        if storage_full(exc):
            stranded(DBOS.workflow_id or run_id)
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
    (STRETCH_WORKFLOW, stretch_workflow),
)

_registered: list[str] = []


def register() -> None:
    """Register ``WORKFLOWS`` with DBOS, once per process (before ``DBOS.launch``)."""
    if _registered:
        return
    for name, fn in WORKFLOWS:
        DBOS.workflow(name=name)(fn)
        _registered.append(name)
