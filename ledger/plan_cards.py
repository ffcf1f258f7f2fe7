"""Plan cards and their revisions: the plans a run's card has held (repairs add revisions).

The plan card (``write_plan_card``) shows the newest revision; every
revision stays in ``plan_revisions`` so an approval of an earlier digest can
still be checked against the plan it approved (replay, audits).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import ValidationError

from contracts import JsonValue, Plan, PlanCardView, canonical_json
from ledger._db import Conn, corrupt, now_iso, sql
from ledger._statement import execute

__all__ = [
    "CARD_COLUMNS",
    "add_revision",
    "card_of",
    "get_plan_card",
    "revision_plan",
    "set_plan_card_status",
    "write_plan_card",
]


_ADD_REVISION = sql(
    "INSERT INTO plan_revisions (run_id, revision, plan_json, plan_digest, previous_digest,"
    " changes_json, created_at) SELECT :r,"
    " (SELECT COALESCE(MAX(revision), 0) + 1 FROM plan_revisions WHERE run_id = :r),"
    " :j, :d, :p, :c, :t WHERE NOT EXISTS"
    " (SELECT 1 FROM plan_revisions WHERE run_id = :r AND plan_digest = :d) RETURNING revision"
)


def add_revision(
    conn: Conn,
    run_id: str,
    plan: Plan,
    digest: str,
    *,
    previous_digest: str | None = None,
    changes: list[JsonValue] | None = None,
) -> int:
    """Record ``plan`` as the run's next revision and put it on the card; its number.

    The first revision is the one ``write_plan_card`` created the card with."""
    values = {
        "r": run_id, "j": canonical_json(plan.model_dump(mode="json")), "d": digest,
        "p": previous_digest, "c": None if changes is None else canonical_json(changes),
        "t": now_iso(),
    }  # fmt: skip
    # The next revision, unless this plan has one (a re-executed step): one statement
    # where the revision is new, the common case.
    added = execute(conn, _ADD_REVISION, values).first()
    if added is None:
        found = execute(
            conn,
            sql("SELECT MAX(revision) FROM plan_revisions WHERE run_id = :r AND plan_digest = :d"),
            {"r": run_id, "d": digest},
        ).scalar()
        return int(str(found))
    revision = int(str(added[0]))
    if previous_digest is not None:
        execute(
            conn,
            sql(
                "UPDATE plan_cards SET plan_json = :j, plan_digest = :d, status = 'waiting_input',"
                " revision = :n, previous_digest = :p, changes_json = :c, updated_at = :t"
                " WHERE run_id = :r"
            ),
            {**values, "n": revision},
        )
    return revision


def revision_plan(conn: Conn, run_id: str, digest: str) -> str | None:
    """The stored JSON of the run's revision with this digest, if there is one."""
    row = execute(
        conn,
        sql("SELECT plan_json FROM plan_revisions WHERE run_id = :r AND plan_digest = :d"),
        {"r": run_id, "d": digest},
    ).first()
    return None if row is None else str(row[0])


def card_digest(conn: Conn, run_id: str) -> str | None:
    """The digest the run's plan card names, or None (no card)."""
    row = execute(
        conn, sql("SELECT plan_digest FROM plan_cards WHERE run_id = :r"), {"r": run_id}
    ).first()
    return None if row is None else str(row[0])


# A plan card's columns, as ``card_of`` reads them (a query may select them with others).
CARD_COLUMNS = "plan_json, plan_digest, status, created_at, revision, previous_digest, changes_json"


def card_of(row: Sequence[object], run_id: str) -> PlanCardView:
    """The card from its ``CARD_COLUMNS``, in that order."""
    try:
        return PlanCardView.model_validate({
            "plan": Plan.model_validate_json(str(row[0])),
            "plan_digest": row[1], "status": row[2], "created_at": row[3],
            "revision": int(str(row[4])), "previous_digest": row[5],
            "changes": None if row[6] is None else json.loads(str(row[6])),
        })  # fmt: skip
    except (ValidationError, ValueError) as exc:
        raise corrupt("plan_cards", run_id, exc) from exc


def get_plan_card(conn: Conn, run_id: str) -> PlanCardView | None:
    row = execute(
        conn,
        sql(f"SELECT {CARD_COLUMNS} FROM plan_cards WHERE run_id = :r"),  # noqa: S608  (fixed columns)
        {"r": run_id},
    ).first()
    return None if row is None else card_of(row, run_id)


def write_plan_card(conn: Conn, run_id: str, plan: Plan, digest: str, status: str) -> None:
    now = now_iso()
    execute(
        conn,
        sql(
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
    """A card's decision (or expiry) is written once: a card already decided or
    expired keeps its status (a revision puts a new plan on it, waiting again)."""
    execute(
        conn,
        sql(
            "UPDATE plan_cards SET status = :s, updated_at = :t WHERE run_id = :r"
            " AND status NOT IN ('approved', 'rejected', 'expired')"
        ),
        {"s": status, "t": now_iso(), "r": run_id},
    )
