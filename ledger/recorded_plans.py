"""Every recorded plan, for ``gatehouse policy what-if``: each run's plan card (its
newest plan revision) with the versions of the rules the run ran under, and what the
run did with it: the steps it reached (``run_steps``: their status and, for the steps
that succeeded, the output a later step's ``input_from`` read) and every revision of
its plan with who approved it. Read-only: four whole-set queries, none per run."""

from __future__ import annotations

import json
from collections.abc import Iterator

import sqlalchemy as sa

from contracts import (
    Decision,
    JsonObject,
    Plan,
    RecordedPlan,
    RecordedRevision,
    RecordedStep,
)
from ledger._db import Conn, sql
from ledger._statement import execute

__all__ = ["recorded_plans"]

_Steps = dict[str, dict[str, RecordedStep]]
_Revision = tuple[str, str | None]  # (plan_digest, plan_json of a revision before the newest)


def _filter(since: str | None, profiles: list[str] | None) -> tuple[str, dict[str, object]]:
    clauses: list[str] = []
    params: dict[str, object] = {}
    if since is not None:
        clauses.append("r.created_at >= :since")
        params["since"] = since
    if profiles is not None:
        clauses.append("r.policy_profile IN :profiles")
        params["profiles"] = list(profiles)
    return (f" AND {' AND '.join(clauses)}" if clauses else ""), params


def _text(text: str, profiles: list[str] | None) -> sa.TextClause:
    statement = sql(text)
    if profiles is not None:
        statement = statement.bindparams(sa.bindparam("profiles", expanding=True))
    return statement


def _output(raw: object) -> JsonObject | None:
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:  # a corrupt row: the step's dependants are decided as planned
        return None
    return value if isinstance(value, dict) else None


def _steps(conn: Conn, where: str, params: dict[str, object], profiles: list[str] | None) -> _Steps:
    out: _Steps = {}
    statement = _text(
        "SELECT s.run_id, s.step_id, s.status,"  # noqa: S608  (clauses are constants; values are bound)
        " CASE WHEN s.status = 'succeeded' THEN s.output_json END"
        f" FROM run_steps s JOIN runs r ON r.run_id = s.run_id WHERE 1 = 1{where}",
        profiles,
    )
    for row in execute(conn, statement, params):
        step = RecordedStep.model_construct(status=str(row[2]), output=_output(row[3]))
        out.setdefault(str(row[0]), {})[str(row[1])] = step
    return out


def _approvers(
    conn: Conn, where: str, params: dict[str, object], profiles: list[str] | None
) -> dict[tuple[str, str], str]:
    statement = _text(
        "SELECT a.run_id, a.plan_digest, a.decided_by"  # noqa: S608  (clauses are constants; values are bound)
        " FROM plan_approvals a JOIN runs r ON r.run_id = a.run_id"
        f" WHERE a.decision = :approved{where}",
        profiles,
    )
    rows = execute(conn, statement, {**params, "approved": Decision.APPROVED.value})
    return {(str(row[0]), str(row[1])): str(row[2]) for row in rows}


def _revisions(
    conn: Conn, where: str, params: dict[str, object], profiles: list[str] | None
) -> dict[str, list[_Revision]]:
    """The revisions of the runs whose plan was revised (the card's newest is not its
    first), oldest first; the plan of every one but the newest."""
    statement = _text(
        "SELECT v.run_id, v.plan_digest,"  # noqa: S608  (clauses are constants; values are bound)
        " CASE WHEN v.revision < c.revision THEN v.plan_json END"
        " FROM plan_revisions v JOIN plan_cards c ON c.run_id = v.run_id"
        " JOIN runs r ON r.run_id = v.run_id"
        f" WHERE c.revision > 1{where} ORDER BY v.run_id, v.revision",
        profiles,
    )
    out: dict[str, list[_Revision]] = {}
    for row in execute(conn, statement, params):
        out.setdefault(str(row[0]), []).append((str(row[1]), row[2]))
    return out


def recorded_plans(
    conn: Conn, *, since: str | None = None, profiles: list[str] | None = None
) -> Iterator[RecordedPlan]:
    """Runs with a plan, oldest first; ``since``: created at or after this ISO stamp;
    ``profiles``: under these profiles only."""
    where, params = _filter(since, profiles)
    steps = _steps(conn, where, params, profiles)
    approvers = _approvers(conn, where, params, profiles)
    revised = _revisions(conn, where, params, profiles)
    statement = _text(
        "SELECT r.run_id, r.created_at, r.submitted_by, r.policy_profile, r.tool_pool,"  # noqa: S608  (clauses are constants; values are bound)
        " r.profile_digest, r.tool_pool_digest, r.cedar_digest, c.plan_json, c.plan_digest"
        f" FROM runs r JOIN plan_cards c ON c.run_id = r.run_id WHERE 1 = 1{where}"
        " ORDER BY r.created_at, r.run_id",
        profiles,
    )
    for row in execute(conn, statement, params):
        run_id = str(row[0])
        found = revised.get(run_id) or [(str(row[9]), None)]
        revisions = [
            RecordedRevision(
                plan_digest=digest,
                approved_by=approvers.get((run_id, digest)),
                plan=None if raw is None else Plan.model_validate_json(str(raw)),
            )
            for digest, raw in found
        ]
        yield RecordedPlan(
            run_id=run_id,
            created_at=str(row[1]),
            submitted_by=str(row[2]),
            policy_profile=str(row[3]),
            tool_pool=str(row[4]),
            profile_digest=row[5],
            tool_pool_digest=row[6],
            cedar_digest=row[7],
            plan=Plan.model_validate_json(str(row[8])),
            steps=steps.get(run_id, {}),
            revisions=revisions,
        )
