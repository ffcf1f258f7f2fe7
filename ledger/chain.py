"""The per-run hash chain over finished ledger entries, and its verification.

When a call is completed, its entry is appended to its run's chain in the same
transaction: ``entry_hash = sha256(canonical [prev_hash, op_key, run_id,
step_id, attempt, kind, target, status, request_digest, response_digest,
error_code])``, ``prev_hash`` being the run's previous entry_hash (64 zeros for
the first). Appends are serialized per run (PostgreSQL: the run's row is locked;
SQLite: one writer at a time) and ``(run_id, chain_seq)`` is UNIQUE, so the head
never forks. ``verify`` recomputes everything from the stored request and
response bodies and names the first entry that does not hold; given the run's
checkpoints (``ledger.anchors``), it also holds the chain to each of them, which
catches what recomputing cannot: the newest entries deleted, or the whole chain
rewritten with consistent hashes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from contracts import JsonObject, JsonValue, digest_of
from ledger._db import Conn, is_postgres
from ledger.anchors import Anchor, problem

__all__ = ["GENESIS", "ChainReport", "append", "verify"]

GENESIS = "0" * 64


def _entry_hash(prev_hash: str, fields: list[JsonValue]) -> str:
    return digest_of([prev_hash, *fields])


_FIELDS = (
    "op_key, run_id, step_id, attempt, kind, target, status, request_digest,"
    " response_digest, error_code"
)


def append(conn: Conn, op_key: str, run_id: str) -> None:
    """Chain the finished entry ``op_key`` onto its run (no-op if already chained)."""
    if is_postgres(conn):
        conn.execute(sa.text("SELECT 1 FROM runs WHERE run_id = :r FOR UPDATE"), {"r": run_id})
    row = conn.execute(
        sa.text(f"SELECT {_FIELDS}, chain_seq FROM calls WHERE op_key = :k"),  # noqa: S608
        {"k": op_key},
    ).first()
    if row is None or row[-1] is not None or row[6] in ("started", "in_doubt"):
        return
    head = conn.execute(
        sa.text(
            "SELECT chain_seq, entry_hash FROM calls WHERE run_id = :r"
            " AND chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1"
        ),
        {"r": run_id},
    ).first()
    seq, prev = (1, GENESIS) if head is None else (int(head[0]) + 1, str(head[1]))
    conn.execute(
        sa.text(
            "UPDATE calls SET chain_seq = :s, prev_hash = :p, entry_hash = :h WHERE op_key = :k"
        ),
        {"s": seq, "p": prev, "h": _entry_hash(prev, list(row[:-1])), "k": op_key},
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

    def to_json(self) -> JsonObject:
        sources: list[JsonValue] = [*sorted({a.source.split(" line ")[0] for a in self.anchors})]
        return {
            "run_id": self.run_id,
            "entries": self.entries,
            "ok": self.ok,
            "head": self.head,
            "anchored": {
                "checkpoints": len(self.anchors),
                "entries": max((a.entries for a in self.anchors), default=None),
                "signed": sum(1 for a in self.anchors if a.signed),
                "sources": sources,
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


def _problem(row: Sequence[Any], prev: str, expected_seq: int) -> str | None:
    fields, seq, prev_hash, entry_hash = list(row[:10]), row[10], row[11], row[12]
    if seq is None:
        return "a finished entry is not on the chain"
    if seq != expected_seq:
        return f"chain_seq {seq} where {expected_seq} was expected"
    if prev_hash != prev:
        return "prev_hash is not the previous entry's hash"
    if _body_digest(row[13]) != row[7]:
        return "the stored request does not match its digest"
    if _body_digest(row[14]) != row[8]:
        return "the stored response does not match its digest"
    if _entry_hash(prev, fields) != entry_hash:
        return "entry_hash does not match the entry"
    return None


def verify(conn: Conn, run_id: str, anchors: Sequence[Anchor] = ()) -> ChainReport:
    """Recompute the run's chain; report the first entry that breaks it, then the
    first of ``anchors`` (the run's checkpoints) it does not match."""
    rows = conn.execute(
        sa.text(
            f"SELECT {_FIELDS}, chain_seq, prev_hash, entry_hash, request_json, response_json"  # noqa: S608
            " FROM calls WHERE run_id = :r ORDER BY chain_seq IS NULL, chain_seq, op_key"
        ),
        {"r": run_id},
    ).all()
    prev, expected_seq, hashes = GENESIS, 1, list[str]()
    held = tuple(anchors)
    for row in rows:
        seq, status = row[10], str(row[6])
        if seq is None and status in ("started", "in_doubt"):
            continue  # not finished: not part of the chain yet
        reason = _problem(row, prev, expected_seq)
        if reason is not None:
            return ChainReport(run_id, len(hashes), False, str(row[0]), seq, reason, prev, held)
        prev, expected_seq = str(row[12]), expected_seq + 1
        hashes.append(prev)
    broken = problem(list(held), hashes)
    if broken is not None:
        return ChainReport(run_id, len(hashes), False, None, broken[0], broken[1], prev, held)
    return ChainReport(run_id, len(hashes), True, head=prev, anchors=held)
