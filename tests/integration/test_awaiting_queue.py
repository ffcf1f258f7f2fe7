"""The approvals queue reads what it shows in a fixed number of statements, however
many runs wait (``ledger.run_views.awaiting_decision``); a walk of a plan's chain of edits
and forks is made only for a run that has one. Both databases."""

from __future__ import annotations

import sqlalchemy as sa

from contracts import Plan, digest_of
from ledger import Database, approvals, plan_cards, run_views
from tests.support.plans import noop_plan
from tests.support.rows import new_run, statements_seen


def _waiting(db: Database, n: int) -> None:
    for k in range(n):
        run_id = f"run_wait_{n}_{k}"
        new_run(db, run_id, objective=f"waiting {k}")
        plan = Plan.model_validate(noop_plan(1, objective=f"waiting {k}"))
        digest = digest_of(plan.model_dump(mode="json"))
        with db.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE runs SET status = 'waiting_approval' WHERE run_id = :r"),
                {"r": run_id},
            )
            plan_cards.write_plan_card(conn, run_id, plan, digest, "waiting_input")
            approvals.endorse(conn, run_id, digest, "ann", comment=None)


def _statements(db: Database) -> tuple[int, list[run_views.Awaiting]]:
    seen = statements_seen(db, "")
    with db.engine.connect() as conn:
        found = run_views.awaiting_decision(conn, 200)
    return len([s for s in seen if not s.lstrip().upper().startswith(("BEGIN", "ROLLBACK"))]), found


def test_the_queue_costs_the_same_for_two_runs_or_six(db: Database) -> None:
    _waiting(db, 2)
    few, found = _statements(db)
    assert len(found) == 2
    assert all(w.card is not None and w.endorsed_by == ("ann",) for w in found)
    assert all([a.part for a in w.authors] == ["submitted"] for w in found)
    _waiting(db, 4)
    many, found = _statements(db)
    assert len(found) == 6
    assert many == few, (few, many)
