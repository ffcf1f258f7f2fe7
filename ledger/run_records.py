"""The records a run's outcome rests on besides its chain, committed at its end.

The chain (``ledger.chain``) covers a run's finished calls, and a decision
carries its own seal; but a seal is kept in the row it seals, so a row deleted
whole leaves nothing behind to miss it. So the checkpoint recorded at a run's
end (``ledger.anchors``, in the database and in the anchor file) also commits
to the run's other records, family by family (``FAMILIES``): each row's key
and a digest of its fields. ``chain_verify.verify`` recomputes them and names a row
that was deleted, changed, or added after the checkpoint.

The families and their fields are those of version 1 of the commitment
(``VERSION``). Changing what a family covers means a new version beside this
one, so that checkpoints already written keep checking as they were made. A
run that ended before this commitment existed has checkpoints without it: the
report says that a deleted record of such a run is not noticed.

Calls that are not on the chain when the run ends (in doubt, waiting for a
person to resolve them) are committed by identity only: resolving one later
chains it and fills in its outcome, and the chain covers it from then on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from contracts import JsonObject, JsonValue, canonical_json, digest_of
from ledger._db import Conn, is_postgres, sql
from ledger._statement import execute

__all__ = ["FAMILIES", "NOT_COVERED", "VERSION", "Family", "commitment", "problem", "rows_of"]

VERSION = 1


@dataclass(frozen=True)
class Family:
    """One kind of record: the rows of ``table`` that belong to a run."""

    name: str
    table: str
    key: tuple[str, ...]
    fields: tuple[str, ...]
    # which rows are the run's (``:r`` is the run id)
    where: str
    # which of those the checkpoint commits to (None: all of them)
    committed: str | None = None
    # whether a row that appears after the checkpoint breaks the run (False where a
    # new row is covered by something else: a call is chained when it finishes)
    closed: bool = True


FAMILIES: tuple[Family, ...] = (
    Family(
        "decisions", "plan_approvals", ("approval_id",),
        ("approval_id", "run_id", "plan_digest", "decision", "decided_by", "comment",
         "decided_at"),
        "run_id = :r",
    ),
    Family(
        "endorsements", "plan_endorsements", ("plan_digest", "endorsed_by"),
        ("run_id", "plan_digest", "endorsed_by", "comment", "endorsed_at"),
        "run_id = :r",
    ),
    Family(
        "revisions", "plan_revisions", ("revision",),
        ("run_id", "revision", "plan_json", "plan_digest", "previous_digest", "changes_json",
         "created_at"),
        "run_id = :r",
    ),
    # the edit that made this run, and an edit of this run's plan that rejected it
    Family(
        "edits", "plan_edits", ("run_id",),
        ("run_id", "parent_run_id", "previous_digest", "edited_by", "edited_at"),
        "run_id = :r OR parent_run_id = :r",
    ),
    Family(
        "cancels", "run_cancels", ("run_id",),
        ("run_id", "requested_by", "reason", "source", "requested_at", "observed_at"),
        "run_id = :r",
    ),
    # the run's own row: its outcome, what it ran under, and a fork's parent and step
    Family(
        "run", "runs", ("run_id",),
        ("run_id", "intent_id", "recipe", "objective", "mode", "status", "submitted_by",
         "policy_profile", "tool_pool", "plan_digest", "error_code", "error_message",
         "finished_at", "profile_digest", "tool_pool_digest", "trace_digest", "random_seed",
         "parent_run_id", "fork_from_step"),
        "run_id = :r",
    ),
    Family(
        "unchained_calls", "calls", ("op_key",),
        ("op_key", "run_id", "step_id", "attempt", "kind", "target", "request_digest"),
        "run_id = :r",
        committed="chain_seq IS NULL",
        closed=False,
    ),
)  # fmt: skip

# What a run's verification does not check, said in its report. (They record or show
# the run rather than decide it; an evidence bundle signs its episodes and artifacts.)
NOT_COVERED = "not checked: episodes, artifacts, run events, plan cards, run steps"


def _key(values: Sequence[JsonValue]) -> str:
    return canonical_json(list(values))


def rows_of(conn: Conn, run_id: str, family: Family, *, committed: bool) -> dict[str, str]:
    """The run's rows of ``family``: key → digest of its fields. ``committed``: only
    those the checkpoint commits to."""
    where = _committed_where(family) if committed else family.where
    columns = ", ".join((*family.key, *family.fields))
    found = execute(
        conn,
        sql(f"SELECT {columns} FROM {family.table} WHERE {where}"),  # noqa: S608  (fixed names)
        {"r": run_id},
    ).all()
    return _digests(family, found)


def _digests(family: Family, rows: Sequence[Sequence[JsonValue]]) -> dict[str, str]:
    """Each of ``family``'s rows (its key, then its fields) as key → digest of fields."""
    n = len(family.key)
    return {_key(row[:n]): digest_of([family.name, list[JsonValue](row[n:])]) for row in rows}


def _committed_where(family: Family) -> str:
    if family.committed is None:
        return family.where
    return f"({family.where}) AND {family.committed}"


@cache
def _commitment_sql(postgres: bool) -> str:
    """Every family's committed rows in one statement: per family, one column holding
    its rows as a JSON array of arrays (key, then fields). The families' columns are
    TEXT and INTEGER, which JSON carries as they are read one family at a time
    (``rows_of``, what ``problem`` reads them by, so a checkpoint that did not agree
    with its records would fail its own run's verification)."""
    each = []
    for family in FAMILIES:
        columns = ", ".join((*family.key, *family.fields))
        rows = (f"COALESCE(json_agg(json_build_array({columns})), '[]'::json)" if postgres
                else f"json_group_array(json_array({columns}))")  # fmt: skip
        each.append(f"(SELECT {rows} FROM {family.table} WHERE {_committed_where(family)})")  # noqa: S608  (fixed names)
    return "SELECT " + ", ".join(each)


def commitment(conn: Conn, run_id: str) -> JsonObject:
    """What a run's checkpoint commits to: per family, each row's key and digest; read
    in one statement (a checkpoint is made at the end of every run)."""
    found = execute(conn, sql(_commitment_sql(is_postgres(conn))), {"r": run_id}).one()
    out: JsonObject = {"version": VERSION}
    for family, value in zip(FAMILIES, found, strict=True):
        rows = json.loads(value) if isinstance(value, str | bytes) else value
        if not isinstance(rows, list):
            raise ValueError(f"the {family.name} of run {run_id} read back as {type(rows)}")
        out[family.name] = dict(_digests(family, rows))
    return out


def _named(family: Family, key: str) -> str:
    """The row a key names, as a person reads it (``decisions: the plan_approvals row
    approval_id=…``); a key that is not one (a hostile checkpoint) is shown as it is."""
    try:
        values = json.loads(key)
    except ValueError:
        values = None
    if not isinstance(values, list) or len(values) != len(family.key):
        return f"{family.name}: the {family.table} row {key[:120]!r}"
    said = ", ".join(f"{k}={v}" for k, v in zip(family.key, values, strict=True))
    return f"{family.name}: the {family.table} row {said}"


def problem(
    conn: Conn, run_id: str, committed: Mapping[str, JsonValue], where: str
) -> tuple[str | None, dict[str, int]]:
    """(the first record that no longer matches the commitment ``committed``, taken
    from the checkpoint described by ``where``, or None; how many rows of each family
    were checked)."""
    checked: dict[str, int] = {}
    if committed.get("version") != VERSION:
        return f"the checkpoint {where} commits to records in an unknown form", checked
    for family in FAMILIES:
        then = committed.get(family.name)
        if not isinstance(then, dict):
            return f"the checkpoint {where} has no {family.name}", checked
        now = rows_of(conn, run_id, family, committed=False)
        for key, digest in then.items():
            if key not in now:
                return f"{_named(family, key)}, anchored {where}, was deleted", checked
            if now[key] != digest:
                return f"{_named(family, key)} was changed after it was anchored {where}", checked
        added = sorted(set(now) - set(then)) if family.closed else []
        if added:
            return f"{_named(family, added[0])} was added after the run's checkpoint {where}", (
                checked
            )
        checked[family.name] = len(then)
    return None, checked
