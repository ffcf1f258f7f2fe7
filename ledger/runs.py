"""Runs, their plan cards, decisions and finished steps.

Every row read back is parsed into its contract model: a row that does not
parse raises ``corrupt_record`` instead of reaching a caller half-valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa
from pydantic import ValidationError

from contracts import (
    ApprovalView,
    BudgetsView,
    Decision,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Plan,
    PlanCardView,
    RunStatus,
    RunSummary,
    RunView,
    StepView,
    canonical_json,
)
from ledger import opa_runs
from ledger._db import Conn, now_iso

__all__ = [
    "Decided",
    "Lineage",
    "decision_for",
    "get_plan_card",
    "get_run",
    "insert_decision",
    "insert_fork",
    "lineage",
    "list_runs",
    "record_step",
    "run_status",
    "set_budgets",
    "set_policy_digests",
    "set_seed",
    "set_status",
    "set_trace_digest",
    "write_plan_card",
]

_RUN_COLUMNS = (
    "run_id, intent_id, recipe, objective, mode, status, phase, submitted_by,"
    " policy_profile, tool_pool, plan_digest, error_code, error_message, created_at, updated_at,"
    " profile_digest, tool_pool_digest, trace_digest, random_seed, parent_run_id, fork_from_step,"
    " budgets_json"
)


def _corrupt(table: str, key: str, exc: Exception) -> GatehouseError:
    return GatehouseError(
        ErrorCode.CORRUPT_RECORD,
        f"a {table} row failed validation when read back",
        {"table": table, "key": key, "problem": str(exc)[:500]},
    )


def run_status(conn: Conn, run_id: str) -> RunStatus | None:
    row = conn.execute(sa.text("SELECT status FROM runs WHERE run_id = :r"), {"r": run_id}).first()
    if row is None:
        return None
    try:
        return RunStatus(row[0])
    except ValueError as exc:
        raise _corrupt("runs", run_id, exc) from exc


def get_plan_card(conn: Conn, run_id: str) -> PlanCardView | None:
    row = conn.execute(
        sa.text(
            "SELECT plan_json, plan_digest, status, created_at, revision, previous_digest,"
            " changes_json FROM plan_cards WHERE run_id = :r"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    try:
        return PlanCardView(
            plan=Plan.model_validate_json(row[0]),
            plan_digest=row[1],
            status=row[2],
            created_at=row[3],
            revision=int(row[4]),
            previous_digest=row[5],
            changes=None if row[6] is None else json.loads(row[6]),
        )
    except ValidationError as exc:
        raise _corrupt("plan_cards", run_id, exc) from exc


def _approvals(conn: Conn, run_id: str) -> list[ApprovalView]:
    rows = conn.execute(
        sa.text(
            "SELECT plan_digest, decision, decided_by, comment, decided_at"
            " FROM plan_approvals WHERE run_id = :r ORDER BY decided_at, approval_id"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            ApprovalView(
                plan_digest=r[0],
                decision=Decision(r[1]),
                decided_by=r[2],
                comment=r[3],
                decided_at=r[4],
            )
            for r in rows
        ]
    except (ValidationError, ValueError) as exc:
        raise _corrupt("plan_approvals", run_id, exc) from exc


def _steps(conn: Conn, run_id: str) -> list[StepView]:
    rows = conn.execute(
        sa.text(
            "SELECT step_id, position, driver_kind, connector_id, status, op_key, output_json,"
            " error_code, error_message, finished_at FROM run_steps WHERE run_id = :r"
            " ORDER BY position"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            StepView(
                step_id=r[0],
                position=r[1],
                driver_kind=r[2],
                connector_id=r[3],
                status=r[4],
                op_key=r[5],
                output=None if r[6] is None else json.loads(r[6]),
                error_code=r[7],
                error_message=r[8],
                finished_at=r[9],
            )
            for r in rows
        ]
    except (ValidationError, ValueError) as exc:
        raise _corrupt("run_steps", run_id, exc) from exc


def get_run(conn: Conn, run_id: str, links: dict[str, str]) -> RunView | None:
    row = conn.execute(
        sa.text(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = :r"),  # noqa: S608  (fixed column list)
        {"r": run_id},
    ).first()
    if row is None:
        return None
    try:
        return RunView(
            run_id=row[0],
            intent_id=row[1],
            recipe=row[2],
            objective=row[3],
            mode=row[4],
            status=row[5],
            phase=row[6],
            submitted_by=row[7],
            policy_profile=row[8],
            tool_pool=row[9],
            plan_digest=row[10],
            error_code=row[11],
            error_message=row[12],
            created_at=row[13],
            updated_at=row[14],
            profile_digest=row[15],
            tool_pool_digest=row[16],
            trace_digest=row[17],
            random_seed=row[18],
            parent_run_id=row[19],
            fork_from_step=row[20],
            budgets=None if row[21] is None else BudgetsView.model_validate_json(row[21]),
            opa=opa_runs.get(conn, run_id),
            plan_card=get_plan_card(conn, run_id),
            approvals=_approvals(conn, run_id),
            steps=_steps(conn, run_id),
            links=links,
        )
    except (ValidationError, ValueError) as exc:
        raise _corrupt("runs", run_id, exc) from exc


def list_runs(
    conn: Conn, status: RunStatus | None, limit: int, before: str | None
) -> list[RunSummary]:
    """Newest first; ``before`` is the created_at|run_id cursor of the last page."""
    clauses: list[str] = []
    params: dict[str, str | int] = {"lim": limit}
    if status is not None:
        clauses.append("status = :st")
        params["st"] = status.value
    if before is not None:
        created, _, rid = before.partition("|")
        clauses.append("(created_at < :c OR (created_at = :c AND run_id < :rid))")
        params.update({"c": created, "rid": rid})
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    # The WHERE clauses are fixed strings; every value is a bound parameter.
    query = (
        "SELECT run_id, recipe, mode, status, phase, created_at, updated_at FROM runs"  # noqa: S608
        f" {where} ORDER BY created_at DESC, run_id DESC LIMIT :lim"
    )
    rows = conn.execute(
        sa.text(query),
        params,
    ).all()
    try:
        return [
            RunSummary(
                run_id=r[0],
                recipe=r[1],
                mode=r[2],
                status=r[3],
                phase=r[4],
                created_at=r[5],
                updated_at=r[6],
            )
            for r in rows
        ]
    except ValidationError as exc:
        raise _corrupt("runs", "list", exc) from exc


def set_status(
    conn: Conn,
    run_id: str,
    status: RunStatus,
    phase: str,
    *,
    error_code: str | None = None,
    error_message: str | None = None,
    plan_digest: str | None = None,
) -> None:
    now = now_iso()
    conn.execute(
        sa.text(
            "UPDATE runs SET status = :s, phase = :p, updated_at = :t,"
            " error_code = COALESCE(:ec, error_code), error_message = COALESCE(:em, error_message),"
            " plan_digest = COALESCE(:pd, plan_digest),"
            " finished_at = CASE WHEN :term THEN :t ELSE finished_at END"
            " WHERE run_id = :r"
        ),
        {
            "s": status.value,
            "p": phase,
            "t": now,
            "ec": error_code,
            "em": error_message,
            "pd": plan_digest,
            "term": status.terminal,
            "r": run_id,
        },
    )


def set_policy_digests(conn: Conn, run_id: str, profile_digest: str, pool_digest: str) -> None:
    """Record exactly which profile and tool pool files the run is held to."""
    conn.execute(
        sa.text("UPDATE runs SET profile_digest = :p, tool_pool_digest = :t WHERE run_id = :r"),
        {"p": profile_digest, "t": pool_digest, "r": run_id},
    )


def set_seed(conn: Conn, run_id: str, seed: str) -> None:
    conn.execute(
        sa.text("UPDATE runs SET random_seed = :s WHERE run_id = :r"), {"s": seed, "r": run_id}
    )


def set_budgets(conn: Conn, run_id: str, budgets: JsonObject) -> None:
    """The run's budgets, used / limit (a display copy; the ledger is the truth)."""
    conn.execute(
        sa.text("UPDATE runs SET budgets_json = :b WHERE run_id = :r"),
        {"b": canonical_json(budgets), "r": run_id},
    )


def set_trace_digest(conn: Conn, run_id: str, trace_digest: str) -> None:
    conn.execute(
        sa.text("UPDATE runs SET trace_digest = :d WHERE run_id = :r"),
        {"d": trace_digest, "r": run_id},
    )


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
    row = conn.execute(
        sa.text(
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
        raise _corrupt("runs", run_id, exc) from exc
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

    DBOS serves the fork everything its parent recorded before the fork point,
    database steps included, so what those steps wrote is copied here: the
    plan card and policy digests, the seed, the approval of the same plan
    digest, and the finished steps before ``from_step`` (their op_keys are the
    parent's calls). From the fork point on, the fork writes its own rows.
    """
    now = now_iso()
    params = {"r": run_id, "p": parent_run_id, "t": now}
    conn.execute(
        sa.text(
            "INSERT INTO runs (run_id, intent_id, recipe, objective, mode, status, phase,"
            " submitted_by, policy_profile, tool_pool, plan_digest, profile_digest,"
            " tool_pool_digest, random_seed, created_at, updated_at, parent_run_id,"
            " fork_from_step)"
            " SELECT :r, intent_id, recipe, objective, mode, :st, 'queued', :by, policy_profile,"
            " tool_pool, plan_digest, profile_digest, tool_pool_digest, random_seed, :t, :t,"
            " run_id, :n FROM runs WHERE run_id = :p"
        ),
        {**params, "st": RunStatus.QUEUED.value, "by": requested_by, "n": from_step},
    )
    conn.execute(
        sa.text(
            "INSERT INTO plan_cards (run_id, plan_json, plan_digest, status, created_at,"
            " updated_at) SELECT :r, plan_json, plan_digest, status, :t, :t FROM plan_cards"
            " WHERE run_id = :p"
        ),
        params,
    )
    conn.execute(
        sa.text(
            "INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision, decided_by,"
            " comment, decided_at)"
            " SELECT :a, :r, plan_digest, decision, decided_by, :c, :t FROM plan_approvals"
            " WHERE run_id = :p AND decision = 'approved'"
        ),
        {
            **params,
            "a": "apr_" + run_id,
            "c": f"carried from parent run {parent_run_id}; fork requested by {requested_by}",
        },
    )
    conn.execute(
        sa.text(
            "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id, status,"
            " op_key, output_json, error_code, error_message, finished_at)"
            " SELECT :r, step_id, position, driver_kind, connector_id, status, op_key,"
            " output_json, error_code, error_message, finished_at FROM run_steps"
            " WHERE run_id = :p AND position < :before"
        ),
        {**params, "before": from_step - 1},
    )


def write_plan_card(conn: Conn, run_id: str, plan: Plan, digest: str, status: str) -> None:
    now = now_iso()
    conn.execute(
        sa.text(
            "INSERT INTO plan_cards (run_id, plan_json, plan_digest, status, created_at,"
            " updated_at) VALUES (:r, :j, :d, :s, :t, :t)"
            " ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,"
            " updated_at = excluded.updated_at"
        ),
        {
            "r": run_id,
            "j": canonical_json(plan.model_dump(mode="json")),
            "d": digest,
            "s": status,
            "t": now,
        },
    )


def set_plan_card_status(conn: Conn, run_id: str, status: str) -> None:
    conn.execute(
        sa.text("UPDATE plan_cards SET status = :s, updated_at = :t WHERE run_id = :r"),
        {"s": status, "t": now_iso(), "r": run_id},
    )


class Decided:
    """A decision on record for one (run, plan digest)."""

    def __init__(self, decision: Decision, decided_by: str, inserted: bool) -> None:
        self.decision = decision
        self.decided_by = decided_by
        self.inserted = inserted


def insert_decision(
    conn: Conn,
    *,
    approval_id: str,
    run_id: str,
    plan_digest: str,
    decision: Decision,
    decided_by: str,
    comment: str | None,
) -> Decided:
    """First decision per (run, digest) wins; the one on record is returned."""
    inserted = conn.execute(
        sa.text(
            "INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision, decided_by,"
            " comment, decided_at) VALUES (:a, :r, :d, :dec, :by, :c, :t)"
            " ON CONFLICT (run_id, plan_digest) DO NOTHING RETURNING approval_id"
        ),
        {
            "a": approval_id,
            "r": run_id,
            "d": plan_digest,
            "dec": decision.value,
            "by": decided_by,
            "c": comment,
            "t": now_iso(),
        },
    ).first()
    on_record = decision_for(conn, run_id, plan_digest)
    if on_record is None:  # pragma: no cover - the row was just written or already there
        raise GatehouseError(ErrorCode.INTERNAL_ERROR, "decision vanished after insert")
    return Decided(on_record.decision, on_record.decided_by, inserted is not None)


def decision_for(conn: Conn, run_id: str, plan_digest: str) -> Decided | None:
    row = conn.execute(
        sa.text(
            "SELECT decision, decided_by FROM plan_approvals WHERE run_id = :r AND plan_digest = :d"
        ),
        {"r": run_id, "d": plan_digest},
    ).first()
    if row is None:
        return None
    try:
        return Decided(Decision(row[0]), row[1], inserted=False)
    except ValueError as exc:
        raise _corrupt("plan_approvals", run_id, exc) from exc


def record_step(
    conn: Conn,
    *,
    run_id: str,
    step_id: str,
    position: int,
    driver_kind: str,
    connector_id: str,
    status: str,
    op_key: str | None,
    output: JsonObject | None,
    error_code: str | None,
    error_message: str | None,
) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id, status,"
            " op_key, output_json, error_code, error_message, finished_at)"
            " VALUES (:r, :s, :p, :dk, :c, :st, :op, :o, :ec, :em, :t)"
            " ON CONFLICT (run_id, step_id) DO NOTHING"
        ),
        {
            "r": run_id,
            "s": step_id,
            "p": position,
            "dk": driver_kind,
            "c": connector_id,
            "st": status,
            "op": op_key,
            "o": None if output is None else canonical_json(output),
            "ec": error_code,
            "em": error_message,
            "t": now_iso(),
        },
    )
