"""A plan's revisions (``ledger.plan_cards.add_revision``), on SQLite and PostgreSQL:
numbered from 1 per run, and a step run again finds its revision instead of adding one."""

from __future__ import annotations

import sqlalchemy as sa

from contracts import Plan, digest_of
from ledger import Database, plan_cards
from tests.support.plans import noop_plan
from tests.support.rows import new_run


def _plan(objective: str) -> tuple[Plan, str]:
    plan = Plan.model_validate(noop_plan(1, objective=objective))
    return plan, digest_of(plan.model_dump(mode="json"))


def test_revisions_number_on_and_a_repeat_finds_its_own(db: Database) -> None:
    new_run(db, "run_a")
    new_run(db, "run_b")
    first, first_digest = _plan("first")
    second, second_digest = _plan("second")
    with db.engine.begin() as conn:
        plan_cards.write_plan_card(conn, "run_a", first, first_digest, "waiting_input")
        assert plan_cards.add_revision(conn, "run_a", first, first_digest) == 1
        assert plan_cards.add_revision(conn, "run_a", first, first_digest) == 1  # run again
        assert plan_cards.add_revision(conn, "run_b", first, first_digest) == 1  # its own run
    with db.engine.begin() as conn:
        got = plan_cards.add_revision(
            conn, "run_a", second, second_digest, previous_digest=first_digest, changes=[]
        )
        assert got == 2
        again = plan_cards.add_revision(
            conn, "run_a", second, second_digest, previous_digest=first_digest, changes=[]
        )
        assert again == 2
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT run_id, revision FROM plan_revisions ORDER BY run_id, revision")
        ).all()
    assert [tuple(r) for r in rows] == [("run_a", 1), ("run_a", 2), ("run_b", 1)]
