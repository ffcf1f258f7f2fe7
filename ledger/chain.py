"""The per-run hash chain over finished ledger entries, sealed decisions, and
their verification (``ledger.chain_verify``).

When a call is completed, its entry is appended to its run's chain in the same
transaction: a copy of its sealed fields (``SEALED_FIELDS``: identity, status,
body digests, error, times, who resolved it) is kept in ``sealed_json`` and
``entry_hash = sha256(canonical [prev_hash, 2, that copy])``, ``prev_hash``
being the run's previous entry_hash (64 zeros for the first). Entries chained
before version 2 of the chain (``chain_version`` NULL) keep their hash over
``[prev_hash, *ENTRY_FIELDS]``. Appends are serialized per run (PostgreSQL: the
run's row is locked; SQLite: one writer at a time) and ``(run_id, chain_seq)``
is UNIQUE, so the head never forks. ``verify`` recomputes everything from the
stored request and response bodies, names a column that no longer matches its
sealed copy, and names the first entry that does not hold; given the run's
checkpoints (``ledger.anchors``), it also holds the chain to each of them, which
catches what recomputing cannot: the newest entries deleted, or the whole chain
rewritten with consistent hashes. A decision on a plan is sealed the same way
when it is recorded (``seal_decision``): its own copy and hash, no chain. What a
release before sealing writes beside a migrated schema (a rolling upgrade) has no
seal; the report counts it (``unsealed``). A seal cannot miss its own row, so a
run's checkpoints also commit to its other records (``ledger.run_records``):
``verify`` names one deleted, changed or added since, and the report says what
it does not cover (``records.not_covered``), plainly for a run whose checkpoints
predate that commitment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from contracts import JsonObject, JsonValue, canonical_json, digest_of
from ledger._db import Conn, is_postgres, sql
from ledger._row_locks import hold_run, run_held
from ledger._statement import execute

__all__ = [
    "DECISION_FIELDS",
    "ENTRY_FIELDS",
    "GENESIS",
    "SEALED_FIELDS",
    "SEALED_VERSION",
    "Entry",
    "append",
    "entry_hash",
    "head_and_entry",
    "head_moved",
    "seal_decision",
    "sealed_copy",
    "unsealed_field",
]

GENESIS = "0" * 64
# The statuses of an entry not finished yet, which has no link.
UNCHAINED = ("started", "in_doubt")
# What these fields are tied to (docs/development.md, "How to add a field to what a tool
# call writes to the ledger"): an evidence bundle carries each entry's ENTRY_FIELDS and
# its verifier recomputes the hash from them (ledger/bundle.py, ledger/bundle_verify.py);
# ledger/chain_verify.py holds each row's columns to its sealed copy of SEALED_FIELDS, so a
# field added to SEALED_FIELDS needs a new SEALED_VERSION (older copies lack it).
# What a version-1 entry's hash covers, in order.
ENTRY_FIELDS = (
    "op_key", "run_id", "step_id", "attempt", "kind", "target", "status", "request_digest",
    "response_digest", "error_code",
)  # fmt: skip
# What a version-2 entry's sealed copy holds.
SEALED_FIELDS = (
    *ENTRY_FIELDS, "started_at", "finished_at", "duration_ms", "resolved_by", "resolved_at",
)  # fmt: skip
SEALED_VERSION = 2
DECISION_FIELDS = (
    "approval_id", "run_id", "plan_digest", "decision", "decided_by", "comment", "decided_at",
)  # fmt: skip


def sealed_copy(entry: Mapping[str, JsonValue]) -> JsonObject | None:
    raw = entry.get("sealed_json")
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def entry_hash(prev_hash: str, entry: Mapping[str, JsonValue]) -> str:
    """The hash an entry (a row of ``calls`` or a bundle's ledger entry, as a
    mapping of column names) should carry after ``prev_hash``."""
    if entry.get("chain_version") == SEALED_VERSION:
        return digest_of([prev_hash, SEALED_VERSION, sealed_copy(entry)])
    return digest_of([prev_hash, *(entry.get(f) for f in ENTRY_FIELDS)])


def unsealed_field(entry: Mapping[str, JsonValue], fields: Sequence[str]) -> str | None:
    """The first of ``fields`` whose value no longer matches the entry's sealed copy
    (a sentence naming it, both values shown), or None; None too for an entry with
    no copy."""
    sealed = sealed_copy(entry)
    if sealed is None:
        return None
    for name in fields:
        if name in sealed and sealed[name] != entry.get(name):
            was, now = json.dumps(sealed[name]), json.dumps(entry.get(name))
            return f"{name} was changed after it was sealed (sealed {was[:80]}, now {now[:80]})"
    return None


def seal_decision(row: Mapping[str, JsonValue]) -> tuple[str, str]:
    """(sealed_json, sealed_hash) for a decision about to be recorded."""
    sealed: JsonObject = {f: row.get(f) for f in DECISION_FIELDS}
    return canonical_json(sealed), digest_of(["decision", sealed])


_COLUMNS = ", ".join(SEALED_FIELDS)
# The entry to chain and the run's chain head (its last link: seq and hash), in one read.
_HEAD = "FROM calls WHERE run_id = :r AND chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1"
_ENTRY_AND_HEAD = sql(
    f"SELECT {_COLUMNS}, chain_seq,"  # noqa: S608  (fixed columns)
    f" (SELECT chain_seq {_HEAD}), (SELECT entry_hash {_HEAD}) FROM calls WHERE op_key = :k"
)
# The same read taking the run's row lock (PostgreSQL).
_ENTRY_AND_HEAD_LOCKED = sql(
    f"SELECT {', '.join(f'c.{f}' for f in SEALED_FIELDS)}, c.chain_seq,"  # noqa: S608
    f" (SELECT chain_seq {_HEAD}), (SELECT entry_hash {_HEAD})"
    " FROM calls c JOIN runs r ON r.run_id = c.run_id WHERE c.op_key = :k FOR UPDATE OF r"
)


def head_moved(exc: BaseException) -> bool:
    """Whether ``exc`` is a link refused because the head it extended was no longer
    the head (see ``head_and_entry``'s ``at_once``): the transaction may be tried again."""
    text = str(exc)
    return isinstance(exc, IntegrityError) and (
        "calls_chain" in text or "calls.run_id, calls.chain_seq" in text
    )


def _mapping(keys: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(keys, row, strict=True))


@dataclass(frozen=True)
class Entry:
    """A ledger entry as the chain sees it, and the head of its run's chain."""

    fields: dict[str, JsonValue]  # its sealed fields (``SEALED_FIELDS``), by name
    chain_seq: int | None  # None: not chained yet
    head_seq: int | None  # the run's last link (None: the chain is empty)
    head_hash: str

    def link(self, **outcome: JsonValue) -> JsonObject:
        """The chain columns (by their names in ``calls``) that link this entry, its
        fields updated with ``outcome`` (a completion's), onto the head."""
        seq, prev = (1, GENESIS) if self.head_seq is None else (self.head_seq + 1, self.head_hash)
        fields = {**self.fields, **outcome}
        sealed = canonical_json({f: fields[f] for f in SEALED_FIELDS})
        versioned: JsonObject = {"chain_version": SEALED_VERSION, "sealed_json": sealed}
        return {"chain_seq": seq, "prev_hash": prev, "entry_hash": entry_hash(prev, versioned),
                "sealed_json": sealed, "chain_version": SEALED_VERSION}  # fmt: skip


def head_and_entry(conn: Conn, op_key: str, run_id: str, *, at_once: bool = False) -> Entry | None:
    """Lock the run's chain (``hold_run``) and read the entry ``op_key`` with the run's
    head, in one read after the lock; None when the entry has no row.

    ``at_once``: on PostgreSQL, the lock taken by the read itself, one statement
    instead of two. A read that waited for the lock sees the head as it was when the
    read began: if another link was added meanwhile, the UNIQUE (run_id, chain_seq)
    refuses the stale one and the caller's transaction is tried again
    (``head_moved``); the chain never forks either way."""
    if at_once and is_postgres(conn):
        found = execute(conn, _ENTRY_AND_HEAD_LOCKED, {"k": op_key, "r": run_id}).first()
        run_held(conn, run_id)
    else:
        hold_run(conn, run_id)
        found = execute(conn, _ENTRY_AND_HEAD, {"k": op_key, "r": run_id}).first()
    if found is None:
        return None
    width = len(SEALED_FIELDS)
    chained, head_seq, head_hash = found[width], found[width + 1], found[width + 2]
    return Entry(
        _mapping(SEALED_FIELDS, found[:width]),
        None if chained is None else int(chained),
        None if head_seq is None else int(head_seq),
        GENESIS if head_hash is None else str(head_hash),
    )


def append(conn: Conn, op_key: str, run_id: str) -> None:
    """Chain the finished entry ``op_key`` onto its run (no-op if already chained or
    not finished). A completion links its entry in its own UPDATE (``ledger.calls``)."""
    entry = head_and_entry(conn, op_key, run_id)
    if entry is None or entry.chain_seq is not None or entry.fields["status"] in UNCHAINED:
        return
    execute(
        conn,
        sql(
            "UPDATE calls SET chain_seq = :chain_seq, prev_hash = :prev_hash,"
            " entry_hash = :entry_hash, sealed_json = :sealed_json,"
            " chain_version = :chain_version WHERE op_key = :k"
        ),
        {**entry.link(), "k": op_key},
    )
