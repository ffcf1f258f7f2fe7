"""Every recorded plan, for ``gatehouse policy what-if``: each run's plan card (its
newest plan revision) with the versions of the rules the run ran under. Read-only."""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa

from contracts import Plan, RecordedPlan
from ledger._db import Conn

__all__ = ["recorded_plans"]


def recorded_plans(
    conn: Conn, *, since: str | None = None, profiles: list[str] | None = None
) -> Iterator[RecordedPlan]:
    """Runs with a plan, oldest first; ``since``: created at or after this ISO stamp;
    ``profiles``: under these profiles only."""
    clauses: list[str] = []
    params: dict[str, object] = {}
    if since is not None:
        clauses.append("r.created_at >= :since")
        params["since"] = since
    if profiles is not None:
        clauses.append("r.policy_profile IN :profiles")
        params["profiles"] = list(profiles)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    statement = sa.text(
        "SELECT r.run_id, r.created_at, r.submitted_by, r.policy_profile, r.tool_pool,"  # noqa: S608  (clauses are constants; values are bound)
        " r.profile_digest, r.tool_pool_digest, r.cedar_digest, c.plan_json"
        f" FROM runs r JOIN plan_cards c ON c.run_id = r.run_id{where}"
        " ORDER BY r.created_at, r.run_id"
    )
    if profiles is not None:
        statement = statement.bindparams(sa.bindparam("profiles", expanding=True))
    for row in conn.execute(statement, params):
        yield RecordedPlan(
            run_id=str(row[0]),
            created_at=str(row[1]),
            submitted_by=str(row[2]),
            policy_profile=str(row[3]),
            tool_pool=str(row[4]),
            profile_digest=row[5],
            tool_pool_digest=row[6],
            cedar_digest=row[7],
            plan=Plan.model_validate_json(str(row[8])),
        )
