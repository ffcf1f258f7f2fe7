"""Runs as read back: one run's view whole (``get_run``), the listing (``list_runs``),
the queue's length (``queued``) and the runs awaiting a decision with what the
approvals queue shows (``awaiting_decision``). Written by ``ledger.runs``.

Every row read back is parsed into its contract model: a row that does not parse
raises ``corrupt_record`` instead of reaching a caller half-valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import accumulate, pairwise

import sqlalchemy as sa
from pydantic import ValidationError

from contracts import (
    BudgetsView,
    EditedFrom,
    PlanAuthor,
    PlanCardView,
    RunStatus,
    RunSummary,
    RunView,
    StepView,
)
from ledger import approvals, edits, opa_runs, plan_cards
from ledger._db import Conn, corrupt, sql
from ledger._statement import execute
from ledger.runs import RUN_COLUMNS

__all__ = ["Awaiting", "awaiting_decision", "get_run", "list_runs", "queued"]


def _steps(conn: Conn, run_id: str) -> list[StepView]:
    rows = execute(
        conn,
        sql(
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
        raise corrupt("run_steps", run_id, exc) from exc


def _authors(conn: Conn, run_id: str, submitter: str, *, derived: bool) -> list[PlanAuthor]:
    """Who wrote the run's plan: a run neither edited nor forked from another has one
    author, its submitter, and costs no walk of a chain (a run's view is read at every
    poll of it); a derived run's chain is walked (``edits.authors``)."""
    if derived:
        return list(edits.authors(conn, run_id).found)
    return [PlanAuthor(name=submitter, part="submitted", run_id=run_id)]


def _of(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


# How many columns each part of ``_GET_RUN`` has: the run's, then each joined record's
# key (None: the run has none) and its columns.
_PARTS = tuple(
    len(c.split(",")) + (0 if i == 0 else 1)
    for i, c in enumerate(
        (RUN_COLUMNS, plan_cards.CARD_COLUMNS, opa_runs.COLUMNS, edits.EDIT_COLUMNS)
    )
)
# A run's row with the records it has at most one of (its plan card, OPA record and
# the edit it was started by), in one read: a run's view is read at every poll of it.
_GET_RUN = (
    f"SELECT {_of('r', RUN_COLUMNS)}, c.run_id, {_of('c', plan_cards.CARD_COLUMNS)},"  # noqa: S608  (fixed columns)
    f" o.run_id, {_of('o', opa_runs.COLUMNS)}, e.run_id, {_of('e', edits.EDIT_COLUMNS)}"
    " FROM runs r LEFT JOIN plan_cards c ON c.run_id = r.run_id"
    " LEFT JOIN opa_runs o ON o.run_id = r.run_id LEFT JOIN plan_edits e ON e.run_id = r.run_id"
    " WHERE r.run_id = :r"
)


def get_run(conn: Conn, run_id: str, links: dict[str, str]) -> RunView | None:
    found = execute(conn, sql(_GET_RUN), {"r": run_id}).first()
    if found is None:
        return None
    row, has_card, has_opa, has_edit = (
        tuple(found[start:end]) for start, end in pairwise([0, *accumulate(_PARTS)])
    )
    card = None if has_card[0] is None else plan_cards.card_of(has_card[1:], run_id)
    opa = None if has_opa[0] is None else opa_runs.view_of(has_opa[1:], run_id)
    edit = None if has_edit[0] is None else edits.edit_from(has_edit[1:])
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
            cedar_digest=row[22],
            opa=opa,
            plan_card=None if card is None else card.model_copy(update={"source": opa}),
            approvals=approvals.approvals_of(conn, run_id),
            steps=_steps(conn, run_id),
            links=links,
            edited_from=None if edit is None else EditedFrom(
                run_id=edit.parent_run_id, plan_digest=edit.previous_digest,
                edited_by=edit.edited_by,
            ),
            plan_authors=_authors(
                conn, run_id, str(row[7]), derived=edit is not None or row[19] is not None
            ),
        )  # fmt: skip
    except (ValidationError, ValueError) as exc:
        raise corrupt("runs", run_id, exc) from exc


def list_runs(
    conn: Conn,
    status: RunStatus | None,
    limit: int,
    before: str | None,
    *,
    submitted_by: str | None = None,
    recipe: str | None = None,
) -> list[RunSummary]:
    """Newest first; ``before`` is the created_at|run_id cursor of the last page;
    ``submitted_by``: only the runs this identity submitted; ``recipe``: of it only."""
    clauses: list[str] = []
    params: dict[str, str | int] = {"lim": limit}
    if status is not None:
        clauses.append("status = :st")
        params["st"] = status.value
    if submitted_by is not None:
        clauses.append("submitted_by = :by")
        params["by"] = submitted_by
    if recipe is not None:
        clauses.append("recipe = :rec")
        params["rec"] = recipe
    if before is not None:
        created, _, rid = before.partition("|")
        clauses.append("(created_at < :c OR (created_at = :c AND run_id < :rid))")
        params.update({"c": created, "rid": rid})
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    # The WHERE clauses are fixed strings; every value is a bound parameter.
    query = (
        "SELECT run_id, recipe, mode, status, phase, created_at, updated_at, objective,"  # noqa: S608
        " submitted_by, error_code FROM runs"
        f" {where} ORDER BY created_at DESC, run_id DESC LIMIT :lim"
    )
    rows = execute(
        conn,
        sql(query),
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
                objective=r[7],
                submitted_by=r[8],
                error_code=r[9],
            )
            for r in rows
        ]
    except ValidationError as exc:
        raise corrupt("runs", "list", exc) from exc


def queued(conn: Conn) -> tuple[int, str | None]:
    """How many runs wait in the queue, and when the oldest of them was submitted."""
    row = execute(
        conn, sql("SELECT COUNT(*), MIN(created_at) FROM runs WHERE status = 'queued'")
    ).one()
    return int(row[0]), None if row[1] is None else str(row[1])


@dataclass(frozen=True)
class Awaiting:
    """A run waiting for a decision on its plan, with what the approvals queue shows."""

    run: RunSummary
    policy_profile: str
    tool_pool: str
    tool_pool_digest: str | None  # the version the run was held to
    # When the wait ends and denies the plan; None: not known here (a run from before
    # runs were split waits in place, and its workflow holds the deadline).
    expires_at: str | None
    card: PlanCardView | None
    authors: tuple[PlanAuthor, ...]  # who wrote part of the plan (none of them decides)
    endorsed_by: tuple[str, ...]  # who approved the current plan so far, toward a quorum


def awaiting_decision(conn: Conn, limit: int) -> list[Awaiting]:
    """The runs waiting for approval, the longest waiting first, at most ``limit``: in
    two reads whatever their number (the runs with their cards, the approvals toward
    their quorums), and a walk of the chain of edits and forks for each run that has one."""
    rows = execute(
        conn,
        sql(
            "SELECT r.run_id, r.recipe, r.mode, r.status, r.phase, r.created_at, r.updated_at,"  # noqa: S608  (fixed columns)
            " r.objective, r.submitted_by, r.error_code, r.policy_profile, r.tool_pool,"
            " r.parked_until, r.parent_run_id IS NOT NULL OR EXISTS (SELECT 1 FROM plan_edits e"
            " WHERE e.run_id = r.run_id), c.run_id IS NOT NULL,"
            f" {', '.join(f'c.{col.strip()}' for col in plan_cards.CARD_COLUMNS.split(','))}"
            ", r.tool_pool_digest FROM runs r LEFT JOIN plan_cards c ON c.run_id = r.run_id"
            " WHERE r.status = :st ORDER BY r.updated_at, r.run_id LIMIT :lim"
        ),
        {"st": RunStatus.WAITING_APPROVAL.value, "lim": limit},
    ).all()
    endorsed: dict[tuple[str, str], list[str]] = {}
    if rows:
        found = execute(
            conn,
            sql(
                "SELECT run_id, plan_digest, endorsed_by FROM plan_endorsements"
                " WHERE run_id IN :r ORDER BY endorsed_at, endorsed_by"
            ).bindparams(sa.bindparam("r", expanding=True)),
            {"r": [str(r[0]) for r in rows]},
        ).all()
        for run_id, digest, by in found:
            endorsed.setdefault((str(run_id), str(digest)), []).append(str(by))
    out: list[Awaiting] = []
    for r in rows:
        run_id = str(r[0])
        try:
            summary = RunSummary(
                run_id=run_id, recipe=r[1], mode=r[2], status=r[3], phase=r[4],
                created_at=r[5], updated_at=r[6], objective=r[7], submitted_by=r[8],
                error_code=r[9],
            )  # fmt: skip
        except ValidationError as exc:
            raise corrupt("runs", run_id, exc) from exc
        card = plan_cards.card_of(r[15:22], run_id) if r[14] else None
        by = () if card is None else tuple(endorsed.get((run_id, card.plan_digest), ()))
        until = None if r[12] is None else str(r[12])
        authors = _authors(conn, run_id, str(r[8]), derived=bool(r[13]))
        pool_digest = None if r[22] is None else str(r[22])
        out.append(
            Awaiting(summary, str(r[10]), str(r[11]), pool_digest, until, card, tuple(authors), by)
        )
    return out
