"""A run's lineage (what a replay needs besides its calls) and forks of a run.

Who asked for a fork is its run's ``submitted_by``; ``ledger.edits.authors`` walks
forks and edits alike back to the first run, for four-eyes."""

from __future__ import annotations

from dataclasses import dataclass

from contracts import RunStatus
from ledger import events
from ledger._db import Conn, corrupt, now_iso, sql
from ledger._statement import execute

__all__ = ["Lineage", "insert_fork", "lineage"]


@dataclass(frozen=True)
class Lineage:
    """What a replay needs to know about a run besides its calls."""

    run_id: str
    status: RunStatus
    intent_id: str
    trace_digest: str | None
    random_seed: str | None
    profile_digest: str | None
    tool_pool_digest: str | None
    parent_run_id: str | None
    fork_from_step: int | None


def lineage(conn: Conn, run_id: str) -> Lineage | None:
    row = execute(
        conn,
        sql(
            "SELECT run_id, status, intent_id, trace_digest, random_seed, profile_digest,"
            " tool_pool_digest, parent_run_id, fork_from_step FROM runs WHERE run_id = :r"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    try:
        status = RunStatus(row[1])
    except ValueError as exc:
        raise corrupt("runs", run_id, exc) from exc
    return Lineage(
        run_id=row[0],
        status=status,
        intent_id=row[2],
        trace_digest=row[3],
        random_seed=row[4],
        profile_digest=row[5],
        tool_pool_digest=row[6],
        parent_run_id=row[7],
        fork_from_step=None if row[8] is None else int(row[8]),
    )


def insert_fork(
    conn: Conn, *, parent_run_id: str, run_id: str, from_step: int, requested_by: str
) -> None:
    """A new run under the parent's intent, linked to it, queued.

    The fork is a run of its own: it gates the plan again, puts it on a plan
    card of its own and waits for its own decision. Its calls before the fork
    point are answered from the parent's ledger, so the finished steps before
    ``from_step`` are copied here (their op_keys are the parent's calls), and
    so is the seed (the same choices). From the fork point on, the fork writes
    its own rows.
    """
    now = now_iso()
    params = {"r": run_id, "p": parent_run_id, "t": now}
    execute(
        conn,
        sql(
            "INSERT INTO runs (run_id, intent_id, recipe, objective, mode, status, phase,"
            " submitted_by, policy_profile, tool_pool, plan_digest, profile_digest,"
            " tool_pool_digest, cedar_digest, random_seed, created_at, updated_at,"
            " parent_run_id, fork_from_step, stretch)"
            " SELECT :r, intent_id, recipe, objective, mode, :st, 'queued', :by, policy_profile,"
            " tool_pool, NULL, profile_digest, tool_pool_digest, cedar_digest, random_seed, :t,"
            " :t, run_id, :n, 0 FROM runs WHERE run_id = :p"
        ),
        {**params, "st": RunStatus.QUEUED.value, "by": requested_by, "n": from_step},
    )
    events.emit(
        conn, run_id, "run.accepted",
        {"parent_run_id": parent_run_id, "from_step": from_step, "submitted_by": requested_by},
    )  # fmt: skip
    execute(
        conn,
        sql(
            "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id, status,"
            " op_key, output_json, error_code, error_message, finished_at)"
            " SELECT :r, step_id, position, driver_kind, connector_id, status, op_key,"
            " output_json, error_code, error_message, finished_at FROM run_steps"
            " WHERE run_id = :p AND position < :before"
        ),
        {**params, "before": from_step - 1},
    )
