"""The exactly-once call ledger: the one write path for provider and tool calls.

``op_key = sha256(run_id, step_id, attempt)``, the primary key. The path:

1. ``claim``   — ``INSERT … status='started' ON CONFLICT (op_key) DO NOTHING
   RETURNING``: at most one claim per op_key, visible even if we then crash; a
   claim that lost ``lookup``s the row, and a finished one is the answer (the
   callee is not called again).
2. the call itself, with op_key sent as the callee's idempotency key.
3. ``complete`` — the response and its digest, ``WHERE status='started'``, and
   the entry's link on the run's hash chain (``ledger/chain.py``), in one UPDATE
   after the chain's lock and head.

Steps 1 and 3 are one commit each, and the whole of the call's checkpoint: no
DBOS step wraps a call (``worker.calls``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import sqlalchemy as sa

from contracts import (
    CallResend,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    canonical_json,
    digest_of,
    sha256_hex,
)
from ledger import cancels, chain, events
from ledger._db import Conn, dbos_workflows, is_postgres, now_iso, sql
from ledger._row_locks import run_held
from ledger._statement import execute, rows_changed

__all__ = [
    "RESOLVED",
    "UNFINISHED",
    "CallRow",
    "Look",
    "claim",
    "complete",
    "in_doubt",
    "look",
    "lookup",
    "mark_in_doubt",
    "of_runs",
    "op_key",
    "resends_of",
    "resent",
    "resolve",
]


def op_key(run_id: str, step_id: str, attempt: int) -> str:
    # Length-prefixed fields: no two (run, step, attempt) triples share a preimage.
    parts = [run_id, step_id, str(attempt)]
    preimage = "".join(f"{len(p)}:{p};" for p in parts)
    return sha256_hex(preimage.encode("utf-8"))


# Statuses of an entry that has not finished: not on the hash chain yet.
UNFINISHED = chain.UNCHAINED
# Statuses an operator's resolution gives an in-doubt entry.
RESOLVED = ("applied", "not_applied")


@dataclass(frozen=True)
class CallRow:
    op_key: str
    status: str  # started | completed | failed | in_doubt | applied | not_applied
    request_digest: str
    response: JsonObject | None
    started_at: str
    run_id: str = ""
    step_id: str = ""
    target: str = ""
    # How long the callee took, as measured when the call completed (None while open).
    duration_ms: int | None = None


_ROW_COLUMNS = (
    "op_key, status, request_digest, response_json, started_at, run_id, step_id,"
    " target, duration_ms"
)
_ROW = f"SELECT {_ROW_COLUMNS} FROM calls"  # noqa: S608  (fixed columns)
# A claimed call's outcome and its chain link, and its row as it then is (none: it
# was not open).
_COMPLETE = sql(
    "UPDATE calls SET status = :status, response_json = :response_json,"  # noqa: S608
    " response_digest = :response_digest, error_code = :error_code,"
    " finished_at = :finished_at, duration_ms = :duration_ms, chain_seq = :chain_seq,"
    " prev_hash = :prev_hash, entry_hash = :entry_hash, sealed_json = :sealed_json,"
    " chain_version = :chain_version"
    f" WHERE op_key = :k AND status = 'started' RETURNING {_ROW_COLUMNS}"
)


def _call_row(row: Sequence[object]) -> CallRow:
    key = str(row[0])
    try:
        response = None if row[3] is None else json.loads(str(row[3]))
    except ValueError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD, "a ledger response is not JSON", {"op_key": key}
        ) from exc
    if response is not None and not isinstance(response, dict):
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD, "a ledger response is not an object", {"op_key": key}
        )
    duration = row[8] if isinstance(row[8], int) else None
    return CallRow(
        key, str(row[1]), str(row[2]), response, str(row[4]), str(row[5]), str(row[6]),
        str(row[7]), duration,
    )  # fmt: skip


def lookup(conn: Conn, key: str) -> CallRow | None:
    row = execute(conn, sql(f"{_ROW} WHERE op_key = :k"), {"k": key}).first()
    return None if row is None else _call_row(tuple(row))


@dataclass(frozen=True)
class Look:
    """What a claim looks at first, in one read: the call's row (None: nobody has
    claimed it), whether DBOS holds the calling workflow cancelled, and the run's
    cancel on record (``ledger.cancels``), if any."""

    row: CallRow | None
    workflow_cancelled: bool = False
    cancel: cancels.Cancel | None = None


@cache
def _look_sql(workflows: str, postgres: bool) -> str:
    """The look's text for one dialect (``workflows``: DBOS's table as it names it),
    made once."""
    mine = ", ".join(f"c.{col}" for col in _ROW_COLUMNS.split(", "))
    theirs = ", ".join(f"x.{col}" for col in cancels.COLUMNS)
    locked = " FOR UPDATE OF r" if postgres else ""
    return (
        f"SELECT {mine}, w.status, {theirs} FROM runs r"  # noqa: S608  (fixed names)
        " LEFT JOIN calls c ON c.op_key = :k"
        f" LEFT JOIN {workflows} w ON w.workflow_uuid = :w"
        f" LEFT JOIN run_cancels x ON x.run_id = r.run_id WHERE r.run_id = :r{locked}"
    )


def look(conn: Conn, key: str, run_id: str, workflow_id: str | None) -> Look:
    """The claim's look at ``key`` (``Look``), one statement; on PostgreSQL it also
    takes the run's row lock, which the claim's event would take next (the
    call's row and the cancel are as the statement began, as two reads before the
    lock would have found them)."""
    text = _look_sql(dbos_workflows(conn), is_postgres(conn))
    found = execute(conn, sql(text), {"k": key, "r": run_id, "w": workflow_id}).first()
    if found is None:
        return Look(None)
    run_held(conn, run_id)
    width = len(_ROW_COLUMNS.split(", "))
    row = None if found[0] is None else _call_row(tuple(found[:width]))
    rest = tuple(found[width + 1 :])
    return Look(row, found[width] == "CANCELLED", None if rest[0] is None else cancels.of_row(rest))


def of_runs(conn: Conn, run_ids: list[str]) -> dict[str, CallRow]:
    """Every entry of these runs by op_key, in one read (a replay serves from it)."""
    stmt = sql(f"{_ROW} WHERE run_id IN :r").bindparams(sa.bindparam("r", expanding=True))
    return {c.op_key: c for c in (_call_row(tuple(r)) for r in execute(conn, stmt, {"r": run_ids}))}


def claim(
    conn: Conn,
    *,
    key: str,
    run_id: str,
    step_id: str,
    attempt: int,
    kind: str,
    target: str,
    request: JsonObject,
) -> bool:
    """Write the ``started`` row and its ``step.started`` event (one statement on
    PostgreSQL); False when another execution holds the claim."""
    write = events.together(
        conn,
        "INSERT INTO calls (op_key, run_id, step_id, attempt, kind, target, status,"
        " request_json, request_digest, started_at)"
        " VALUES (:k, :r, :s, :a, :kind, :tg, 'started', :rq, :rd, :t)"
        " ON CONFLICT (op_key) DO NOTHING",
        {
            "k": key,
            "r": run_id,
            "s": step_id,
            "a": attempt,
            "kind": kind,
            "tg": target,
            "rq": canonical_json(request),
            "rd": digest_of(request),
            "t": now_iso(),
        },
        events.Emits(
            run_id, "step.started",
            {"step_id": step_id, "attempt": attempt, "kind": kind, "target": target,
             "op_key": key},
        ),
    )  # fmt: skip
    return write.changed(conn, execute(conn, write.statement, write.values))


def complete(
    conn: Conn,
    *,
    key: str,
    run_id: str,
    response: JsonObject,
    ok: bool,
    error_code: str | None,
    duration_ms: int,
) -> CallRow:
    """Record the outcome of a claimed call, linked onto its run's chain in the same
    UPDATE, and return the row as it then is. The run's chain is locked and its head
    read first, in one statement (``chain.head_and_entry``: a head that moved while
    that read waited for the lock is refused, ``chain.head_moved``, and the caller's
    transaction is tried again), so the link is made from the head it extends; a row
    no longer ``started`` (another execution finished it) is answered as it stands,
    chained if it was not yet."""
    entry = chain.head_and_entry(conn, key, run_id, at_once=True)
    if entry is None:
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, "a claimed call vanished", {"op_key": key})
    outcome: JsonObject = {
        "status": "completed" if ok else "failed",
        "response_digest": digest_of(response),
        "error_code": error_code,
        "finished_at": now_iso(),
        "duration_ms": duration_ms,
    }
    written = None
    if entry.fields["status"] == "started" and entry.chain_seq is None:
        columns = entry.link(**outcome)
        written = execute(
            conn,
            _COMPLETE,
            {**outcome, **columns, "response_json": canonical_json(response), "k": key},
        ).first()
    if written is None:  # finished by another execution: as it stands, chained
        chain.append(conn, key, run_id)
        row = lookup(conn, key)
        if row is None:
            raise GatehouseError(
                ErrorCode.CORRUPT_RECORD, "a claimed call vanished", {"op_key": key}
            )
        return row
    row = _call_row(tuple(written))
    _written(conn, row, error_code=error_code)
    return row


def _written(conn: Conn, row: CallRow, **extra: str | None) -> None:
    events.emit(
        conn, row.run_id, "ledger.written",
        {"op_key": row.op_key, "step_id": row.step_id, "status": row.status,
         "target": row.target, "duration_ms": row.duration_ms, **extra},
    )  # fmt: skip


def mark_in_doubt(conn: Conn, key: str) -> None:
    """An interrupted call to a callee without idempotency keys: wait for a person."""
    result = execute(
        conn,
        sql("UPDATE calls SET status = 'in_doubt' WHERE op_key = :k AND status = 'started'"),
        {"k": key},
    )
    marked = rows_changed(result)
    row = lookup(conn, key) if marked else None
    if row is not None:
        _written(conn, row)


def resolve(
    conn: Conn, *, key: str, outcome: str, resolved_by: str, note: str | None
) -> tuple[CallRow, bool]:
    """Record an operator's word on an in-doubt call and chain it. Returns the row
    as it stands now, and whether this call recorded the resolution (False when it
    was not in doubt: already resolved, finished, or never interrupted)."""
    if outcome not in RESOLVED:
        raise ValueError(f"unknown resolution {outcome!r}")
    response: JsonObject = {"resolution": outcome, "resolved_by": resolved_by, "note": note}
    now = now_iso()
    changed = execute(
        conn,
        sql(
            "UPDATE calls SET status = :st, response_json = :rs, response_digest = :rd,"
            " resolved_by = :by, resolved_at = :t, finished_at = :t"
            " WHERE op_key = :k AND status = 'in_doubt' RETURNING run_id"
        ),
        {
            "st": outcome,
            "rs": canonical_json(response),
            "rd": digest_of(response),
            "by": resolved_by,
            "t": now,
            "k": key,
        },
    ).first()
    if changed is not None:
        chain.append(conn, key, str(changed[0]))
    row = lookup(conn, key)
    if row is None:
        raise GatehouseError(ErrorCode.CALL_NOT_FOUND, "no ledger entry has that op_key")
    if changed is not None:
        _written(conn, row, resolved_by=resolved_by)
    return row, changed is not None


def in_doubt(conn: Conn, run_id: str) -> list[str]:
    """The run's op_keys waiting for an operator."""
    rows = execute(
        conn,
        sql("SELECT op_key FROM calls WHERE run_id = :r AND status = 'in_doubt' ORDER BY op_key"),
        {"r": run_id},
    ).all()
    return [str(r[0]) for r in rows]


def resent(conn: Conn, key: str, why: str, executor_id: str) -> int:
    """Record that the call ``key`` is sent again now (its claim was interrupted), before
    it is: how many times it will have been sent (1 + its re-sends)."""
    found = execute(
        conn,
        sql("SELECT resends_json FROM calls WHERE op_key = :k FOR UPDATE")
        if is_postgres(conn)
        else sql("SELECT resends_json FROM calls WHERE op_key = :k"),
        {"k": key},
    ).first()
    if found is None:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD, "a call sent again has no row", {"op_key": key}
        )
    earlier = resends_of(key, found[0])
    again = CallResend(at=now_iso(), why=why, executor_id=executor_id)
    listed: list[JsonValue] = [r.model_dump(mode="json") for r in (*earlier, again)]
    execute(
        conn,
        sql("UPDATE calls SET resends_json = :j WHERE op_key = :k"),
        {"j": canonical_json(listed), "k": key},
    )
    return 1 + len(listed)


def resends_of(key: str, raw: object) -> list[CallResend]:
    if raw is None:
        return []
    try:
        return [CallResend.model_validate(r) for r in json.loads(str(raw))]
    except (ValueError, TypeError) as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD, "a call's re-sends do not read", {"op_key": key}
        ) from exc
