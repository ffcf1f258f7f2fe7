"""Slack messages a bot posted about a plan (``slack_messages``), and why each closes.

A Slack sink that posts with the Web API gets a handle on each message it posts
(channel, ts); a message about a plan waiting for a decision is kept here with the
run and the plan's digest. ``closings`` finds the open ones whose plan can no
longer be decided and says why (a decision on record, an edit, a newer revision,
the wait expired, the run ended); the notifier closes each (``close``) in the
transaction that writes the delivery updating it in Slack, so it is closed once
and updated at least once. What the line says is the notifier's business.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa

from contracts import JsonObject, canonical_json
from ledger import approvals
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute, rows_changed

__all__ = ["Closing", "SlackMessage", "Why", "close", "closings", "messages_of", "record_posted"]

Why = Literal["approved", "rejected", "edited", "replaced", "expired", "cancelled", "ended"]


@dataclass(frozen=True)
class SlackMessage:
    sink_id: str
    channel: str
    ts: str
    run_id: str
    plan_digest: str
    seq: int  # the run event the message announced
    message: JsonObject  # what it said: text and blocks
    closed_at: str | None = None
    closed_line: str | None = None


@dataclass(frozen=True)
class Closing:
    """An open message whose plan can no longer be decided, and why."""

    message: SlackMessage
    why: Why
    by: str | None  # who decided, edited or cancelled (None: nobody did)
    at: str | None  # when (ISO 8601; None: not recorded)
    detail: str | None = None  # the edit's run, the run's end status and code


def record_posted(
    conn: Conn,
    *,
    sink_id: str,
    channel: str,
    ts: str,
    run_id: str,
    plan_digest: str,
    seq: int,
    delivery_id: str,
    message: JsonObject,
) -> bool:
    """Keep a message just posted (False: it was kept already)."""
    result = execute(conn,
        sql(
            "INSERT INTO slack_messages (sink_id, channel, ts, run_id, plan_digest, seq,"
            " delivery_id, message_json, posted_at) VALUES (:k, :c, :ts, :r, :d, :s, :dl, :m, :t)"
            " ON CONFLICT (sink_id, channel, ts) DO NOTHING"
        ),
        {"k": sink_id, "c": channel, "ts": ts, "r": run_id, "d": plan_digest, "s": seq,
         "dl": delivery_id, "m": canonical_json(message), "t": now_iso()},
    )  # fmt: skip
    return rows_changed(result) > 0


_TERMINAL = ("planned", "succeeded", "failed", "rejected", "cancelled")

# An open message, and what the run and the plan it names say now. A message can be
# closed when its plan has a decision or an edit on record, the run holds another
# plan, its wait is over, or the run ended; otherwise it is left out.
_CLOSING = sql(
    "SELECT m.sink_id, m.channel, m.ts, m.run_id, m.plan_digest, m.seq, m.message_json,"
    " a.decision, a.decided_by, a.decided_at, e.run_id, e.edited_by, e.edited_at,"
    " r.status, r.error_code, r.plan_digest, r.finished_at, r.parked_at, r.parked_until,"
    " c.requested_by, c.requested_at"
    " FROM slack_messages m JOIN runs r ON r.run_id = m.run_id"
    " LEFT JOIN plan_approvals a ON a.run_id = m.run_id AND a.plan_digest = m.plan_digest"
    " LEFT JOIN plan_edits e ON e.parent_run_id = m.run_id AND e.previous_digest = m.plan_digest"
    " LEFT JOIN run_cancels c ON c.run_id = m.run_id"
    " WHERE m.closed_at IS NULL AND (a.decision IS NOT NULL OR e.run_id IS NOT NULL"
    "  OR r.status IN :done OR (r.plan_digest IS NOT NULL AND r.plan_digest <> m.plan_digest)"
    "  OR (r.parked_at LIKE '@approval%' AND r.parked_until <= :now))"
    " ORDER BY m.posted_at, m.ts LIMIT :n"
).bindparams(sa.bindparam("done", expanding=True))


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _closing(conn: Conn, r: Sequence[object]) -> Closing:
    message = SlackMessage(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), int(str(r[5])),
                           json.loads(str(r[6])))  # fmt: skip
    decision, decided_by, decided_at = _opt(r[7]), _opt(r[8]), _opt(r[9])
    edit_run, edited_by, edited_at = _opt(r[10]), _opt(r[11]), _opt(r[12])
    status, error_code, current, finished_at = str(r[13]), _opt(r[14]), _opt(r[15]), _opt(r[16])
    parked_until, cancelled_by, cancelled_at = _opt(r[18]), _opt(r[19]), _opt(r[20])
    if edit_run is not None:  # an edit is recorded as a rejection by its editor, too
        return Closing(message, "edited", edited_by, edited_at, edit_run)
    if decision == "approved":
        # a plan that needed several approvers names them all, in the order they came
        names = approvals.endorsers(conn, message.run_id, message.plan_digest)
        by = ", ".join(names) if len(names) > 1 else decided_by
        return Closing(message, "approved", by, decided_at)
    if decision == "rejected":
        return Closing(message, "rejected", decided_by, decided_at)
    if current is not None and current != message.plan_digest:
        return Closing(message, "replaced", None, None, current)
    if status == "cancelled":
        return Closing(message, "cancelled", cancelled_by, cancelled_at or finished_at)
    if status == "failed" and error_code == "approval_timeout":
        return Closing(message, "expired", None, parked_until or finished_at)
    if status in _TERMINAL:
        detail = status if error_code is None else f"{status}, {error_code}"
        return Closing(message, "ended", None, finished_at, detail)
    return Closing(message, "expired", None, parked_until)  # the wait is over, not yet swept


def closings(conn: Conn, limit: int = 100) -> list[Closing]:
    """Open messages whose plan can no longer be decided, oldest first, with why."""
    rows = execute(conn, _CLOSING, {"done": _TERMINAL, "now": now_iso(), "n": limit}).all()
    return [_closing(conn, tuple(r)) for r in rows]


def close(conn: Conn, message: SlackMessage, line: str) -> bool:
    """Mark the message closed with ``line``; False when another notifier did first."""
    result = execute(
        conn,
        sql(
            "UPDATE slack_messages SET closed_at = :t, closed_line = :l"
            " WHERE sink_id = :k AND channel = :c AND ts = :ts AND closed_at IS NULL"
        ),
        {"t": now_iso(), "l": line, "k": message.sink_id, "c": message.channel, "ts": message.ts},
    )
    return rows_changed(result) > 0


def messages_of(conn: Conn, run_id: str) -> list[SlackMessage]:
    """The run's messages, in the order they were posted."""
    rows = execute(
        conn,
        sql(
            "SELECT sink_id, channel, ts, run_id, plan_digest, seq, message_json, closed_at,"
            " closed_line FROM slack_messages WHERE run_id = :r ORDER BY posted_at, ts"
        ),
        {"r": run_id},
    ).all()
    return [
        SlackMessage(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), int(str(r[5])),
                     json.loads(str(r[6])), _opt(r[7]), _opt(r[8]))
        for r in rows
    ]  # fmt: skip
