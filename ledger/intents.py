"""Intents and the runs they start (written by the shim in one transaction)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from contracts import (
    ErrorCode,
    GatehouseError,
    IntentRequest,
    JsonObject,
    RunStatus,
    canonical_json,
    digest_of,
    sha256_hex,
)
from ledger import events, work_queue
from ledger._db import Conn, is_postgres, now_iso, sql
from ledger._statement import execute

__all__ = [
    "ExistingIntent",
    "find_by_idempotency_key",
    "insert_intent_and_run",
    "request_digest",
    "request_for_run",
    "scoped_key",
    "take_intent",
]


@dataclass(frozen=True)
class ExistingIntent:
    intent_id: str
    run_id: str
    request_digest: str
    status: str


def request_digest(request: IntentRequest) -> str:
    return digest_of(request.model_dump(mode="json"))


def scoped_key(submitter: str, key: str) -> str:
    """An Idempotency-Key is its submitter's own: stored as ``SUBMITTER KEY`` (neither
    an identity nor a key holds a space), so another submitter's same key is another
    intent, and never finds, or names, this one's run."""
    return f"{submitter} {key}"


def find_by_idempotency_key(conn: Conn, submitter: str, key: str) -> ExistingIntent | None:
    """The intent ``submitter`` made under ``key``. A key stored before keys were scoped
    (bare) counts only for the submitter who used it."""
    row = execute(
        conn,
        sql(
            "SELECT i.intent_id, r.run_id, i.request_digest, r.status"
            " FROM intents i JOIN runs r ON r.intent_id = i.intent_id"
            " WHERE i.idempotency_key IN (:scoped, :bare) AND i.submitted_by = :s"
            " ORDER BY CASE WHEN i.idempotency_key = :scoped THEN 0 ELSE 1 END"
        ),
        {"scoped": scoped_key(submitter, key), "bare": key, "s": submitter},
    ).first()
    if row is None:
        return None
    return ExistingIntent(intent_id=row[0], run_id=row[1], request_digest=row[2], status=row[3])


_INTENT_SQL = (
    "INSERT INTO intents (intent_id, idempotency_key, request_json, request_digest,"
    " submitted_by, created_at) VALUES (:i, :k, :j, :d, :s, :t)"
)
_RUN_SQL = (
    "INSERT INTO runs (run_id, intent_id, recipe, objective, mode, status, phase,"
    " submitted_by, policy_profile, tool_pool, created_at, updated_at, stretch)"
    " VALUES (:r, :i, :rec, :o, :m, :st, 'queued', :s, :p, :tp, :t, :t, 0)"
)
# PostgreSQL: the intent, its run and the run's first event in one statement (one
# round trip, the intake's hot path); the foreign keys between them are checked at
# the statement's end, when all three rows are there.
_ALL_IN_ONE = sql(f"WITH i AS ({_INTENT_SQL}), r AS ({_RUN_SQL}) {events.FIRST_SQL}")
# What waits for a worker: runs queued in all, and those of the submitter ``:s``.
_BACKLOG_SQL = (
    "SELECT COUNT(*), COALESCE(SUM(CASE WHEN submitted_by = :s THEN 1 ELSE 0 END), 0)"
    " FROM runs WHERE status = 'queued'"
)
# PostgreSQL, the intake: the three rows, the backlog the run joins and the word to the
# workers, in one round trip. The count does not see the new run: a statement's parts
# all read the snapshot it began with.
_TAKEN = sql(
    f"WITH i AS ({_INTENT_SQL}), r AS ({_RUN_SQL}), e AS ({events.FIRST_SQL})"  # noqa: S608
    f" SELECT b.*, pg_notify(:wc, :wp) FROM ({_BACKLOG_SQL}) b"
)


def take_intent(
    conn: Conn,
    *,
    intent_id: str,
    run_id: str,
    request: IntentRequest,
    idempotency_key: str | None,
    partition: str,
) -> tuple[int, int]:
    """The intake's writes: a new run's rows (``insert_intent_and_run``) and the word to
    the workers of queue ``partition`` when the transaction commits
    (``work_queue.notify_work``). Answers the backlog the run joins, counted without it:
    (runs queued in all, runs queued by its submitter). A caller that finds no room
    refuses by rolling the transaction back, so nothing it wrote stays and no worker is
    told. On PostgreSQL all of this is one statement (the intake's hot path)."""
    values = _values(intent_id, run_id, request, idempotency_key)
    if is_postgres(conn):
        row = execute(conn, _TAKEN, {**values, "wc": work_queue.WORK_CHANNEL, "wp": partition})
        total, theirs, _ = row.one()
        return int(total), int(theirs)
    total, theirs = execute(conn, sql(_BACKLOG_SQL), {"s": request.submitted_by}).one()
    _insert_each(conn, values)
    work_queue.notify_work(conn, partition)
    return int(total), int(theirs)


def insert_intent_and_run(
    conn: Conn,
    *,
    intent_id: str,
    run_id: str,
    request: IntentRequest,
    idempotency_key: str | None,
) -> None:
    """A new run's rows: its intent, the run (queued) and its ``run.accepted`` event."""
    values = _values(intent_id, run_id, request, idempotency_key)
    if is_postgres(conn):
        execute(conn, _ALL_IN_ONE, values)
        return
    _insert_each(conn, values)


def _insert_each(conn: Conn, values: dict[str, str | None]) -> None:
    for text in (_INTENT_SQL, _RUN_SQL, events.FIRST_SQL):
        execute(conn, sql(text), values)


def _values(
    intent_id: str, run_id: str, request: IntentRequest, idempotency_key: str | None
) -> dict[str, str | None]:
    """The parameters of the new run's three rows."""
    now = now_iso()
    spelled = canonical_json(request.model_dump(mode="json"))  # stored, and its digest
    key = None if idempotency_key is None else scoped_key(request.submitted_by, idempotency_key)
    accepted: JsonObject = {
        "recipe": request.recipe,
        "mode": request.mode.value,
        "submitted_by": request.submitted_by,
    }
    return {
        "i": intent_id,
        "k": key,
        "j": spelled,
        "d": sha256_hex(spelled.encode("utf-8")),
        "s": request.submitted_by,
        "t": now,
        "r": run_id,
        "rec": request.recipe,
        "o": request.objective,
        "m": request.mode.value,
        "st": RunStatus.QUEUED.value,
        "p": request.policy_profile,
        "tp": request.tool_pool,
        **events.first_values(run_id, "run.accepted", accepted),
    }


def request_for_run(conn: Conn, run_id: str) -> IntentRequest | None:
    """The intent a run was started from, parsed back into its contract."""
    row = execute(
        conn,
        sql(
            "SELECT i.request_json FROM intents i JOIN runs r ON r.intent_id = i.intent_id"
            " WHERE r.run_id = :r"
        ),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    try:
        return IntentRequest.model_validate_json(row[0])
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "an intents row failed validation when read back",
            {"table": "intents", "key": run_id, "problem": str(exc)[:500]},
        ) from exc
