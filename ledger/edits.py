"""Plans an approver edited before deciding (``plan_edits``): the run an edit started,
the run and plan digest it came from, and who edited it. One edit per plan: the
unique index refuses a second edit of the same revision.

Also who wrote a run's plan (``authors``): the whole chain of edits and forks the
run came from, back to the run first submitted, since four-eyes holds for all of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts import PlanAuthor
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute

__all__ = [
    "CHAIN_LIMIT", "EDIT_COLUMNS", "Authors", "Edit", "authors", "edit_from", "edit_of",
    "insert_edit",
]  # fmt: skip

# How many runs back ``authors`` walks. Each link is a person's edit or fork, so an
# honest chain never comes near it; a longer one (or a loop, which only a rewritten
# table can make) is reported as not whole and nobody may decide on it.
CHAIN_LIMIT = 256


@dataclass(frozen=True)
class Edit:
    parent_run_id: str
    previous_digest: str
    edited_by: str


def insert_edit(conn: Conn, run_id: str, edit: Edit) -> None:
    execute(conn,
        sql(
            "INSERT INTO plan_edits (run_id, parent_run_id, previous_digest, edited_by,"
            " edited_at) VALUES (:r, :p, :d, :b, :t)"
        ),
        {"r": run_id, "p": edit.parent_run_id, "d": edit.previous_digest, "b": edit.edited_by,
         "t": now_iso()},
    )  # fmt: skip


# An edit's columns, as ``edit_from`` reads them (a query may select them with others).
EDIT_COLUMNS = "parent_run_id, previous_digest, edited_by"


def edit_of(conn: Conn, run_id: str) -> Edit | None:
    """The edit the run was started by, if it was."""
    row = execute(
        conn,
        sql(f"SELECT {EDIT_COLUMNS} FROM plan_edits WHERE run_id = :r"),  # noqa: S608  (fixed columns)
        {"r": run_id},
    ).first()
    return None if row is None else edit_from(row)


def edit_from(row: Sequence[object]) -> Edit:
    """The edit from its ``EDIT_COLUMNS``, in that order."""
    return Edit(str(row[0]), str(row[1]), str(row[2]))


@dataclass(frozen=True)
class Authors:
    """Who wrote a run's plan, first submitter first; ``whole`` is False when the
    chain cannot be walked to its first run (longer than ``CHAIN_LIMIT``, or broken):
    then nobody can be shown to be outside it."""

    found: tuple[PlanAuthor, ...]
    whole: bool


# The run, then each run it came from: an edit's parent (plan_edits), else a fork's
# (runs.parent_run_id). ``depth`` bounds the walk whatever the rows say.
_CHAIN_SQL = """
WITH RECURSIVE chain(run_id, depth) AS (
    SELECT CAST(:r AS TEXT), CAST(0 AS INTEGER)
    UNION ALL
    SELECT COALESCE(e.parent_run_id, r.parent_run_id), c.depth + 1
    FROM chain c
    JOIN runs r ON r.run_id = c.run_id
    LEFT JOIN plan_edits e ON e.run_id = c.run_id
    WHERE COALESCE(e.parent_run_id, r.parent_run_id) IS NOT NULL
      AND c.depth < CAST(:limit AS INTEGER)
)
SELECT c.depth, c.run_id, r.submitted_by, i.submitted_by, e.edited_by, r.parent_run_id
FROM chain c
LEFT JOIN runs r ON r.run_id = c.run_id
LEFT JOIN intents i ON i.intent_id = r.intent_id
LEFT JOIN plan_edits e ON e.run_id = c.run_id
ORDER BY c.depth DESC
"""


def authors(conn: Conn, run_id: str) -> Authors:
    """Everyone who wrote part of the run's plan: each run's submitter (and its intent's),
    every editor, every fork's requester, from the first run of the chain to this one."""
    rows = execute(conn, sql(_CHAIN_SQL), {"r": run_id, "limit": CHAIN_LIMIT}).all()
    # No such run, a link to a run that is gone, or a run both edited and forked (no
    # code makes one: it would have two pasts, and the walk follows only one).
    if not rows or any(row[2] is None or (row[4] and row[5]) for row in rows):
        return Authors((), whole=False)
    found: list[PlanAuthor] = []
    seen: set[tuple[str, str]] = set()

    def add(name: object, part: str, at: str) -> None:
        if name is None or (str(name), part) in seen:
            return
        seen.add((str(name), part))
        found.append(PlanAuthor.model_validate({"name": str(name), "part": part, "run_id": at}))

    for _depth, at, run_by, intent_by, edited_by, fork_of in rows:
        if edited_by is not None:
            add(edited_by, "edited", at)
        if fork_of is not None and edited_by is None:
            add(run_by, "forked", at)  # a fork's run row names who asked for it
        else:
            add(run_by, "submitted", at)
        add(intent_by, "submitted", at)
    # The deepest row reached the limit and still had a parent: the walk stopped short.
    depth, oldest = int(rows[0][0]), str(rows[0][1])
    return Authors(tuple(found), whole=depth < CHAIN_LIMIT or _is_first(conn, oldest))


def _is_first(conn: Conn, run_id: str) -> bool:
    """The run came from no other (neither an edit nor a fork)."""
    row = execute(
        conn,
        sql(
            "SELECT r.parent_run_id, e.parent_run_id FROM runs r"
            " LEFT JOIN plan_edits e ON e.run_id = r.run_id WHERE r.run_id = :r"
        ),
        {"r": run_id},
    ).first()
    return row is not None and row[0] is None and row[1] is None
