"""A run's hash chain verified (``verify``): every entry recomputed from its stored
bodies and held to its sealed copy, every sealed decision to its seal, and, given
the run's checkpoints (``ledger.anchors``), the chain and the run's other records
(``ledger.run_records``) held to each of them. How the chain is written, and what
each entry seals, is ``ledger.chain``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts import JsonObject, JsonValue, digest_of
from ledger import run_records
from ledger._db import Conn, sql
from ledger._statement import execute
from ledger.anchors import Anchor, problem
from ledger.chain import (
    DECISION_FIELDS,
    GENESIS,
    SEALED_FIELDS,
    SEALED_VERSION,
    entry_hash,
    sealed_copy,
    unsealed_field,
)

__all__ = ["ChainReport", "verify"]


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
    if e["chain_version"] == SEALED_VERSION and sealed_copy(e) is None:
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
        d: dict[str, Any] = dict(
            zip((*DECISION_FIELDS, "sealed_json", "sealed_hash"), row, strict=True)
        )
        where = f"decision {d['approval_id']}"
        sealed = sealed_copy(d)
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
        e: dict[str, Any] = dict(zip(_VERIFIED, row, strict=True))
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
