"""Follow-up messages to interactive runs: one ``run_messages`` row per turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contracts import JsonObject
from ledger import events
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute

__all__ = ["Message", "add", "get", "last"]


@dataclass(frozen=True)
class Message:
    run_id: str
    turn: int
    text: str | None
    ends: bool
    sent_by: str
    sent_at: str

    def as_json(self) -> JsonObject:
        return {
            "turn": self.turn,
            "text": self.text,
            "ends": self.ends,
            "sent_by": self.sent_by,
            "sent_at": self.sent_at,
        }


def _of(row: Sequence[Any]) -> Message:
    return Message(str(row[0]), int(row[1]), row[2], bool(row[3]), str(row[4]), str(row[5]))


_COLUMNS = "run_id, turn, text, ends, sent_by, sent_at"


def last(conn: Conn, run_id: str) -> Message | None:
    row = execute(
        conn,
        sql(
            f"SELECT {_COLUMNS} FROM run_messages WHERE run_id = :r"  # noqa: S608  (fixed columns)
            " ORDER BY turn DESC LIMIT 1"
        ),
        {"r": run_id},
    ).first()
    return None if row is None else _of(row)


def get(conn: Conn, run_id: str, turn: int) -> Message | None:
    row = execute(
        conn,
        sql(f"SELECT {_COLUMNS} FROM run_messages WHERE run_id = :r AND turn = :t"),  # noqa: S608
        {"r": run_id, "t": turn},
    ).first()
    return None if row is None else _of(row)


def add(conn: Conn, run_id: str, text: str | None, ends: bool, sent_by: str) -> Message:
    """The run's next turn. The caller holds the run's row lock (``cancels.lock_run``)."""
    previous = last(conn, run_id)
    message = Message(
        run_id, 1 if previous is None else previous.turn + 1, text, ends, sent_by, now_iso()
    )
    execute(
        conn,
        sql(
            f"INSERT INTO run_messages ({_COLUMNS}) VALUES (:r, :t, :x, :e, :b, :a)"  # noqa: S608
        ),
        {
            "r": run_id,
            "t": message.turn,
            "x": text,
            "e": 1 if ends else 0,
            "b": sent_by,
            "a": message.sent_at,
        },
    )
    events.emit(conn, run_id, "message", {"turn": message.turn, "ends": ends, "sent_by": sent_by})
    return message
