"""Plans an approver edited before deciding (``plan_edits``): the run an edit started,
the run and plan digest it came from, and who edited it. One edit per plan: the
unique index refuses a second edit of the same revision."""

from __future__ import annotations

from dataclasses import dataclass

from ledger._db import Conn, now_iso, sql

__all__ = ["Edit", "edit_of", "insert_edit"]


@dataclass(frozen=True)
class Edit:
    parent_run_id: str
    previous_digest: str
    edited_by: str


def insert_edit(conn: Conn, run_id: str, edit: Edit) -> None:
    conn.execute(
        sql(
            "INSERT INTO plan_edits (run_id, parent_run_id, previous_digest, edited_by,"
            " edited_at) VALUES (:r, :p, :d, :b, :t)"
        ),
        {"r": run_id, "p": edit.parent_run_id, "d": edit.previous_digest, "b": edit.edited_by,
         "t": now_iso()},
    )  # fmt: skip


def edit_of(conn: Conn, run_id: str) -> Edit | None:
    """The edit the run was started by, if it was."""
    row = conn.execute(
        sql("SELECT parent_run_id, previous_digest, edited_by FROM plan_edits WHERE run_id = :r"),
        {"r": run_id},
    ).first()
    return None if row is None else Edit(str(row[0]), str(row[1]), str(row[2]))
