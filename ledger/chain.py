"""The per-run hash chain over finished ledger entries, sealed decisions, and
their verification.

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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from contracts import JsonObject, JsonValue, canonical_json, digest_of
from ledger import run_records
from ledger._db import Conn, is_postgres, sql
from ledger._row_locks import hold_run, run_held
from ledger._statement import execute
from ledger.anchors import Anchor, problem

__all__ = [
    "ENTRY_FIELDS",
    "GENESIS",
    "SEALED_FIELDS",
    "ChainReport",
    "Entry",
    "append",
    "entry_hash",
    "head_and_entry",
    "head_moved",
    "seal_decision",
    "unsealed_field",
    "verify",
]

GENESIS = "0" * 64
# The statuses of an entry not finished yet, which has no link.
UNCHAINED = ("started", "in_doubt")
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


def _sealed_copy(entry: Mapping[str, JsonValue]) -> JsonObject | None:
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
        return digest_of([prev_hash, SEALED_VERSION, _sealed_copy(entry)])
    return digest_of([prev_hash, *(entry.get(f) for f in ENTRY_FIELDS)])


def unsealed_field(entry: Mapping[str, JsonValue], fields: Sequence[str]) -> str | None:
    """The first of ``fields`` whose value no longer matches the entry's sealed copy
    (a sentence naming it, both values shown), or None; None too for an entry with
    no copy."""
    sealed = _sealed_copy(entry)
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


@dataclass(frozen=True)
class ChainReport:
    run_id: str
    entries: int
    ok: bool
    broken_op_key: str | None = None
    broken_seq: int | None = None
    reason: str | None = None
    head: str = GENESIS
    # How many checkpoints the chain was held to, and where they came from.
    anchors: tuple[Anchor, ...] = ()
    # Entries and decisions written with no sealed copy: by a release before
    # sealing, running beside a schema already migrated (a rolling upgrade).
    unsealed: int = 0
    # The run's other records held to a checkpoint (``ledger.run_records``): how
    # many of each family; None when no checkpoint of the run commits to them.
    records: Mapping[str, int] | None = None

    def not_covered(self) -> list[JsonValue]:
        """What this verification could not have noticed, in sentences."""
        said: list[JsonValue] = [run_records.NOT_COVERED]
        if self.records is None:
            families = ", ".join(f.name for f in run_records.FAMILIES)
            said.insert(
                0,
                f"no checkpoint of this run commits to its other records ({families}): it has"
                " not ended, or ended before checkpoints did this; one of them deleted whole"
                " would not be noticed (a changed decision still is, by its seal)",
            )
        return said

    def to_json(self) -> JsonObject:
        # Each checkpoint is written in the database and as a line of the anchor file:
        # the total counts both copies; per source, the database's is a bundle's count.
        held = Counter(a.source.split(" line ")[0] for a in self.anchors)
        by_source: JsonObject = dict(sorted(held.items()))
        sources: list[JsonValue] = [*by_source]
        checked: JsonValue = None if self.records is None else dict(self.records)
        return {
            "run_id": self.run_id,
            "entries": self.entries,
            "ok": self.ok,
            "head": self.head,
            "unsealed": self.unsealed,
            "records": {"checked": checked, "not_covered": self.not_covered()},
            "anchored": {
                "checkpoints": len(self.anchors),
                "entries": max((a.entries for a in self.anchors), default=None),
                "signed": sum(1 for a in self.anchors if a.signed),
                "sources": sources,
                "by_source": by_source,
            },
            "first_broken": None
            if self.ok
            else {
                "op_key": self.broken_op_key,
                "chain_seq": self.broken_seq,
                "reason": self.reason,
            },
        }


def _body_digest(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        parsed: JsonValue = json.loads(raw)
    except ValueError:
        return "unparseable"
    return digest_of(parsed)


_VERIFIED = (
    *SEALED_FIELDS, "chain_seq", "prev_hash", "entry_hash", "request_json", "response_json",
    "sealed_json", "chain_version",
)  # fmt: skip


def _problem(e: Mapping[str, Any], prev: str, expected_seq: int) -> str | None:
    seq = e["chain_seq"]
    if seq is None:
        return "a finished entry is not on the chain"
    if seq != expected_seq:
        return f"chain_seq {seq} where {expected_seq} was expected"
    if e["prev_hash"] != prev:
        return "prev_hash is not the previous entry's hash"
    if _body_digest(e["request_json"]) != e["request_digest"]:
        return "the stored request does not match its digest"
    if _body_digest(e["response_json"]) != e["response_digest"]:
        return "the stored response does not match its digest"
    changed = unsealed_field(e, SEALED_FIELDS)
    if changed is not None:
        return changed
    if e["chain_version"] == SEALED_VERSION and _sealed_copy(e) is None:
        return "a sealed entry's copy is missing or unreadable"
    if entry_hash(prev, e) != e["entry_hash"]:
        if e["chain_version"] == SEALED_VERSION:
            return "entry_hash does not match the entry's sealed copy"
        return "entry_hash does not match the entry"
    return None


def _decisions(conn: Conn, run_id: str) -> tuple[str | None, int]:
    """(the first of the run's decisions whose row no longer matches its seal, how
    many carry no seal at all)."""
    rows = execute(
        conn,
        sql(
            f"SELECT {', '.join(DECISION_FIELDS)}, sealed_json, sealed_hash"  # noqa: S608
            " FROM plan_approvals WHERE run_id = :r ORDER BY decided_at, approval_id"
        ),
        {"r": run_id},
    ).all()
    unsealed = 0
    for row in rows:
        d = _mapping((*DECISION_FIELDS, "sealed_json", "sealed_hash"), row)
        where = f"decision {d['approval_id']}"
        sealed = _sealed_copy(d)
        if d["sealed_json"] is None and d["sealed_hash"] is None:
            unsealed += 1  # recorded by a release before sealing, after the migration
            continue
        if sealed is None:
            return f"{where}: its sealed copy is missing or unreadable", unsealed
        changed = unsealed_field(d, DECISION_FIELDS)
        if changed is not None:
            return f"{where}: {changed}", unsealed
        # a decision recorded before the migration has its copy from it and no hash
        if d["sealed_hash"] is not None and d["sealed_hash"] != digest_of(["decision", sealed]):
            return f"{where}: sealed_hash does not match its sealed copy", unsealed
    return None, unsealed


def _vouching(held: Sequence[Anchor]) -> list[Anchor]:
    """The checkpoints whose records count: each one in the database, and the last of
    the run's lines in each anchor file. A line before the last was appended by a run's
    end whose transaction then rolled back (a crash, a lost race) and ran again; what
    that line committed to was never committed (its end time, a cancel seen only by the
    next attempt). Its chain head still holds, and is checked with the others."""
    kept: list[Anchor] = []
    last: dict[str, tuple[int, Anchor]] = {}
    for a in held:
        file, said, n = a.source.rpartition(" line ")
        if not said or not n.isdigit():
            kept.append(a)
        elif file not in last or int(n) > last[file][0]:
            last[file] = (int(n), a)
    return kept + [a for _, a in last.values()]


def _records(
    conn: Conn, run_id: str, held: Sequence[Anchor]
) -> tuple[str | None, Mapping[str, int] | None]:
    """(the first of the run's other records that a checkpoint no longer vouches for,
    how many of each family were checked; None when no checkpoint commits to them)."""
    checked: Mapping[str, int] | None = None
    for a in _vouching(held):
        if a.records is None:
            continue  # a checkpoint from before they were committed
        where = f"at {a.recorded_at} in {a.source}"
        if not isinstance(a.records, dict):
            return f"the checkpoint {where} commits to records in an unknown form", checked or {}
        broken, counted = run_records.problem(conn, run_id, a.records, where)
        if broken is not None:
            # a checkpoint does commit to them (the report must not say none does):
            # what was checked before the one found broken
            return broken, {**(checked or {}), **counted}
        checked = counted
    return None, checked


def verify(conn: Conn, run_id: str, anchors: Sequence[Anchor] = ()) -> ChainReport:
    """Recompute the run's chain; report the first entry that breaks it, then the
    first decision that no longer matches its seal, then the first of ``anchors``
    (the run's checkpoints) it does not match, then the first of the run's other
    records a checkpoint committed to that was deleted, changed or added."""
    rows = execute(
        conn,
        sql(
            f"SELECT {', '.join(_VERIFIED)} FROM calls WHERE run_id = :r"  # noqa: S608
            " ORDER BY chain_seq IS NULL, chain_seq, op_key"
        ),
        {"r": run_id},
    ).all()
    prev, expected_seq, hashes, unsealed = GENESIS, 1, list[str](), 0
    held = tuple(anchors)
    record, counted = _records(conn, run_id, held)
    for row in rows:
        e = _mapping(_VERIFIED, row)
        seq, status = e["chain_seq"], str(e["status"])
        if seq is None and status in ("started", "in_doubt"):
            continue  # not finished: not part of the chain yet
        reason = _problem(e, prev, expected_seq)
        if reason is not None:
            key = str(e["op_key"])
            return ChainReport(
                run_id, len(hashes), False, key, seq, reason, prev, held, records=counted
            )
        prev, expected_seq = str(e["entry_hash"]), expected_seq + 1
        unsealed += int(e["sealed_json"] is None)
        hashes.append(prev)
    decision, unsealed_decisions = _decisions(conn, run_id)
    unsealed += unsealed_decisions
    broken = problem(list(held), hashes)
    seq, reason = (None, decision) if decision is not None else broken or (None, record)
    if reason is not None:
        return ChainReport(
            run_id, len(hashes), False, None, seq, reason, prev, held, unsealed, counted
        )  # fmt: skip
    return ChainReport(
        run_id, len(hashes), True, head=prev, anchors=held, unsealed=unsealed, records=counted
    )
