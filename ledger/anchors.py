"""Anchored chain heads: a run's chain head, recorded where a database edit cannot reach.

At a run's end the worker records a checkpoint — run id, entries (the head's
chain_seq), head (its entry_hash), when, by whom — in ``chain_checkpoints``
and appends the same record as one JSON line to the anchor file
(``GATEHOUSE_ANCHOR_FILE``, default ``var/anchors.jsonl``), signed with the
deployment's key when one is configured (a DSSE envelope over the RFC 8785
body; ``ledger.signing``).

``chain_verify.verify`` holds a run's chain to every checkpoint of it: a chain with
fewer entries than a checkpoint counted was truncated; one whose entry at a
checkpoint's position has another hash was rewritten (a rewrite that recomputed
every hash consistently included). A checkpoint the chain has grown past (an
in-doubt call resolved after the run ended) still holds: its entry is unchanged.
A checkpoint also commits to the run's other records (``records``: its
decisions, endorsements, plan revisions, edits, cancel, its own row; see
``ledger.run_records``), so that a record deleted whole is noticed too.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from contracts import JsonObject, JsonValue, canonical_json
from ledger import run_records
from ledger._db import Conn, no_space, now_iso, sql, storage_full
from ledger._statement import execute
from ledger.signing import SigningKey, jcs_digest, sign_envelope

__all__ = [
    "CHECKPOINT_PAYLOAD_TYPE",
    "CHECKPOINT_TYPE",
    "DEFAULT_ANCHOR_FILE",
    "Anchor",
    "anchor_run",
    "append_line",
    "chain_head",
    "from_file",
    "of_run",
    "problem",
    "record_checkpoint",
    "records_of",
]

DEFAULT_ANCHOR_FILE = "var/anchors.jsonl"
CHECKPOINT_TYPE = "https://gatehouse.dev/checkpoint/v1"
CHECKPOINT_PAYLOAD_TYPE = "application/vnd.gatehouse.checkpoint+json"
GENESIS = "0" * 64


@dataclass(frozen=True)
class Anchor:
    run_id: str
    entries: int
    head: str
    recorded_at: str
    source: str  # "the database" | "<file> line N"
    signed: bool
    # what the checkpoint commits to besides the chain (``ledger.run_records``); None
    # for a checkpoint written before it did
    records: JsonValue = field(default=None, compare=False)


def chain_head(conn: Conn, run_id: str) -> tuple[int, str]:
    """(entries, head hash) of the run's chain as stored: (0, genesis) without entries."""
    row = execute(
        conn,
        sql(
            "SELECT chain_seq, entry_hash FROM calls WHERE run_id = :r AND chain_seq IS NOT NULL"
            " ORDER BY chain_seq DESC LIMIT 1"
        ),
        {"r": run_id},
    ).first()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def record_checkpoint(
    conn: Conn, run_id: str, executor_id: str, key: SigningKey | None
) -> JsonObject:
    """Checkpoint the run's chain head in the database; the record (body and envelope)."""
    entries, head = chain_head(conn, run_id)
    body: JsonObject = {
        "_type": CHECKPOINT_TYPE,
        "run_id": run_id,
        "entries": entries,
        "head": head,
        "recorded_at": now_iso(),
        "executor_id": executor_id,
        "chain_canonicalization": "gatehouse-json-v1",
        "records": run_records.commitment(conn, run_id),
    }
    envelope = None if key is None else sign_envelope(key, CHECKPOINT_PAYLOAD_TYPE, body)
    execute(
        conn,
        sql(
            "INSERT INTO chain_checkpoints (checkpoint_id, run_id, entries, head, recorded_at,"
            " body_json, envelope_json) VALUES (:i, :r, :n, :h, :t, :b, :e)"
            " ON CONFLICT (checkpoint_id) DO NOTHING"
        ),
        {
            "i": jcs_digest([run_id, entries, head]),
            "r": run_id,
            "n": entries,
            "h": head,
            "t": body["recorded_at"],
            "b": canonical_json(body),
            "e": None if envelope is None else canonical_json(envelope),
        },
    )
    return {"checkpoint": body, "envelope": envelope}


def append_line(path: Path, record: JsonObject) -> None:
    """One whole line at the end of the anchor file, on disk before this returns.

    A full disk (ENOSPC, or a short write) is ``storage_full``, and the file is cut
    back to where it ended: a half line would glue itself to the next checkpoint
    appended, and that one would no longer read as a checkpoint."""
    line = (canonical_json(record) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        if not storage_full(exc):
            raise
        raise no_space(f"the anchor file {path}", exc) from exc
    try:
        end = os.fstat(fd).st_size
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"wrote {written} of {len(line)} bytes")
            os.fsync(fd)
        except OSError as exc:
            if not storage_full(exc):
                raise
            os.ftruncate(fd, end)  # frees what the partial line took: cannot itself need space
            raise no_space(f"the anchor file {path}", exc) from exc
    finally:
        os.close(fd)


def anchor_run(
    conn: Conn, run_id: str, executor_id: str, key: SigningKey | None, path: Path
) -> JsonObject:
    """Both anchors of a run's end: the database row and the line in the anchor file.
    (Called in the transaction that ends the run; if it rolls back and runs again, the
    file holds the same checkpoint twice, which checks the same.)"""
    record = record_checkpoint(conn, run_id, executor_id, key)
    append_line(path, record)
    return record


def _anchor(body: JsonValue, envelope: JsonValue, source: str) -> Anchor | None:
    if not isinstance(body, dict):
        return None
    run_id, entries, head = body.get("run_id"), body.get("entries"), body.get("head")
    if not isinstance(run_id, str) or not isinstance(entries, int) or not isinstance(head, str):
        return None
    return Anchor(
        run_id,
        entries,
        head,
        str(body.get("recorded_at")),
        source,
        envelope is not None,
        body.get("records"),
    )


def _stored(conn: Conn, run_id: str) -> list[tuple[str, str | None]]:
    rows = execute(
        conn,
        sql(
            "SELECT body_json, envelope_json FROM chain_checkpoints WHERE run_id = :r"
            " ORDER BY entries, recorded_at"
        ),
        {"r": run_id},
    ).all()
    return [(str(b), None if e is None else str(e)) for b, e in rows]


def of_run(conn: Conn, run_id: str) -> list[Anchor]:
    rows = _stored(conn, run_id)
    found = []
    for body, envelope in rows:
        anchor = _anchor(json.loads(body), envelope, "the database")
        if anchor is not None:
            found.append(anchor)
    return found


def records_of(conn: Conn, run_id: str) -> list[JsonObject]:
    """The run's checkpoints in the database, as written (for an evidence bundle)."""
    rows = _stored(conn, run_id)
    return [
        {"checkpoint": json.loads(b), "envelope": None if e is None else json.loads(e)}
        for b, e in rows
    ]


def from_file(path: Path, run_id: str) -> list[Anchor]:
    """The run's checkpoints in the anchor file (none when there is no file). A line
    that is not a checkpoint is skipped: it cannot vouch for anything."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = []
    for n, line in enumerate(text.splitlines(), start=1):
        if run_id not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        anchor = _anchor(record.get("checkpoint"), record.get("envelope"), f"{path} line {n}")
        if anchor is not None and anchor.run_id == run_id:
            found.append(anchor)
    return found


def problem(anchors: list[Anchor], hashes: list[str]) -> tuple[int, str] | None:
    """(chain_seq, reason) for the first checkpoint the chain ``hashes`` (entry_hash of
    seq 1, 2, …) breaks, largest checkpoint first; None if every one holds."""
    for a in sorted(anchors, key=lambda x: -x.entries):
        if len(hashes) < a.entries:
            return a.entries, (
                f"the chain has {len(hashes)} entries but the checkpoint of {a.recorded_at}"
                f" in {a.source} anchored {a.entries}: entries were removed"
            )
        at = hashes[a.entries - 1] if a.entries else GENESIS
        if at != a.head:
            return a.entries, (
                f"entry {a.entries}'s hash is not the head anchored at {a.recorded_at} in"
                f" {a.source}: the chain was rewritten"
            )
    return None
