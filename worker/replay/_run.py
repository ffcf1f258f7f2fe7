"""Replay: run a finished run's flow again with every call served from the ledger.

``replay_run`` executes ``worker.flow.run_intent`` — the same code the live
workflow runs — through ``ReplayPorts``: each planner and tool call builds
its request exactly as the live step does, then is answered by the ledger
entry of its op_key. Nothing is sent anywhere (no handler or planner is ever
invoked) and nothing is written. The replay ends with the trace digest it
computed, which must equal the one the run recorded when it ended.

A call without a ledger entry, or whose request digest differs from the
recorded one, is a divergence: the replay stops there and reports the step
and both digests. A fork's calls before its fork point are its parent's, so
they are looked up under the parent's run id (recursively, for a fork of a
fork).

The ``gatehouse.replay`` workflow lets the shim ask a worker for a replay
(the shim never imports this package).
"""

from __future__ import annotations

from contracts import (
    ErrorCode,
    GatehouseError,
    IntentJob,
    ReplayDivergence,
    ReplayReport,
)
from ledger import (
    Database,
    forks,
    intents,
    opa_runs,
)
from ledger.forks import Lineage
from worker.flow import run_intent
from worker.replay._ports import DivergedError, ReplayPorts, ReplayRules
from worker.runtime import WorkerSettings

__all__ = ["lineage_chain", "recorded_job", "replay_run", "trace_so_far"]


def lineage_chain(db: Database, run_id: str) -> list[Lineage]:
    """The run, then its parent, grandparent… (a fork's calls before its fork point
    are its parent's)."""
    chain: list[Lineage] = []
    next_id: str | None = run_id
    with db.engine.connect() as conn:
        while next_id is not None and len(chain) < 64:
            found = forks.lineage(conn, next_id)
            if found is None:
                break
            chain.append(found)
            next_id = found.parent_run_id
    return chain


def recorded_job(db: Database, chain: list[Lineage], *, stretched: bool = False) -> IntentJob:
    """The job a run was started with, rebuilt from its rows (a fork runs its parent's)."""
    run = chain[0]
    with db.engine.connect() as conn:
        request = intents.request_for_run(conn, run.run_id)
        # a fork runs its parent's job: the archive is the first one up the lineage
        opa = next(
            (found for r in chain if (found := opa_runs.job(conn, r.run_id)) is not None), None
        )
    if request is None:
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, f"run {run.run_id!r} has no intent")
    return IntentJob(
        run_id=run.run_id,
        intent_id=run.intent_id,
        request=request,
        opa=opa,
        stretched=stretched,
        fork_from_step=run.fork_from_step,
    )


def _run_flow(
    db: Database, settings: WorkerSettings, chain: list[Lineage], rules: ReplayRules = "recorded"
) -> tuple[ReplayPorts, list[ReplayDivergence]]:
    run = chain[0]
    job = recorded_job(db, chain)
    divergences: list[ReplayDivergence] = []
    with db.engine.connect() as conn:
        ports = ReplayPorts(conn, settings, chain, rules)
        try:
            run_intent(job, run.run_id, ports)
        except DivergedError as stop:
            divergences.append(stop.divergence)
    return ports, divergences


def trace_so_far(db: Database, settings: WorkerSettings, run_id: str) -> str | None:
    """The trace digest the flow reaches over what the run recorded, finished or not.

    For a run whose workflow was cancelled through DBOS and so never ran its
    own finish: the sweep records this, and a later replay must reach it
    again. None when the recorded rows do not replay.
    """
    chain = lineage_chain(db, run_id)
    if not chain:
        return None
    ports, divergences = _run_flow(db, settings, chain)
    return None if divergences else ports.trace_digest


def replay_run(
    db: Database, settings: WorkerSettings, run_id: str, rules: ReplayRules = "recorded"
) -> ReplayReport:
    """Replay one finished run from its ledger; never calls out, never writes. Under
    the rules it ran under (``recorded``), or today's (``current``)."""
    chain = lineage_chain(db, run_id)
    if not chain:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    run = chain[0]
    if not run.status.terminal:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FINISHED,
            f"run {run_id!r} is {run.status.value}; only a finished run can be replayed",
            {"status": run.status.value},
        )
    ports, divergences = _run_flow(db, settings, chain, rules)
    replayed = ports.trace_digest if not divergences else None
    if not divergences and replayed != run.trace_digest:
        divergences.append(
            ReplayDivergence(
                kind="trace_digest",
                step_id=None,
                op_key=None,
                recorded_digest=run.trace_digest,
                replayed_digest=replayed,
                message="the replayed calls do not add up to the recorded trace digest",
            )
        )
    return ReplayReport(
        run_id=run_id,
        match=not divergences,
        recorded_trace_digest=run.trace_digest,
        replayed_trace_digest=replayed,
        calls=ports.served,
        outbound_calls=0,
        divergences=divergences,
        rules=rules,
    )
