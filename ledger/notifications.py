"""Outbound notifications: the events still to fan out, and the delivery rows.

``run_events`` rows written with ``notify_pending = 1`` are fanned out by a
worker's notifier into one ``notification_deliveries`` row per sink that wants
them, in one transaction with clearing the mark. Deliveries are claimed with a
lease, sent, and marked delivered, retried later, or given up. The SQL is here;
what a notification says and how it is sent are in ``worker/notify``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from contracts import JsonObject, canonical_json, sha256_hex
from ledger._db import Conn, db_clock, is_postgres, iso, now_iso, now_sql, sql
from ledger._statement import execute, rows_changed

__all__ = [
    "Delivery",
    "PendingEvent",
    "WaitingApproval",
    "add_delivery",
    "claim_due",
    "clear_pending",
    "deliveries_of",
    "delivery_id",
    "mark_delivered",
    "mark_failed",
    "pending_events",
    "waiting_approvals",
]


def delivery_id(run_id: str, seq: int, event: str, sink_id: str) -> str:
    parts = [run_id, str(seq), event, sink_id]
    return "dlv_" + sha256_hex("".join(f"{len(p)}:{p};" for p in parts).encode())[:32]


@dataclass(frozen=True)
class PendingEvent:
    run_id: str
    seq: int
    kind: str
    body: JsonObject
    at: str
    # the run, for the notification's text
    recipe: str
    objective: str
    submitted_by: str
    plan_digest: str | None


def pending_events(conn: Conn, limit: int = 100) -> list[PendingEvent]:
    rows = execute(
        conn,
        sql(
            "SELECT e.run_id, e.seq, e.kind, e.body_json, e.at, r.recipe, r.objective,"
            " r.submitted_by, r.plan_digest FROM run_events e JOIN runs r ON r.run_id = e.run_id"
            " WHERE e.notify_pending = 1 ORDER BY e.at, e.run_id, e.seq LIMIT :n"
        ),
        {"n": limit},
    ).all()
    return [
        PendingEvent(str(r[0]), int(r[1]), str(r[2]), json.loads(str(r[3])), str(r[4]),
                     str(r[5]), str(r[6]), str(r[7]), None if r[8] is None else str(r[8]))
        for r in rows
    ]  # fmt: skip


def clear_pending(conn: Conn, run_id: str, seq: int) -> None:
    execute(
        conn,
        sql("UPDATE run_events SET notify_pending = NULL WHERE run_id = :r AND seq = :s"),
        {"r": run_id, "s": seq},
    )


def add_delivery(
    conn: Conn, *, run_id: str, seq: int, event: str, sink_id: str, payload: JsonObject
) -> bool:
    """One delivery row, due now by the database's clock; False when it is already
    there (fanned out before)."""
    now = now_sql(not is_postgres(conn))  # in the statement: no round trip for the clock
    result = execute(conn,
        sql(
            "INSERT INTO notification_deliveries (delivery_id, run_id, seq, event, sink_id,"  # noqa: S608  (now is one of two constant SQL expressions)
            " payload_json, status, attempts, next_attempt_at, created_at)"
            f" VALUES (:d, :r, :s, :e, :k, :p, 'pending', 0, {now}, {now})"
            " ON CONFLICT (delivery_id) DO NOTHING"
        ),
        {"d": payload["delivery_id"], "r": run_id, "s": seq, "e": event, "k": sink_id,
         "p": canonical_json(payload)},
    )  # fmt: skip
    return rows_changed(result) > 0


@dataclass(frozen=True)
class Delivery:
    delivery_id: str
    run_id: str
    event: str
    sink_id: str
    payload: JsonObject
    status: str
    attempts: int
    last_error: str | None
    delivered_at: str | None


_COLUMNS = (
    "delivery_id, run_id, event, sink_id, payload_json, status, attempts, last_error, delivered_at"
)


def _delivery(r: Sequence[object]) -> Delivery:
    return Delivery(str(r[0]), str(r[1]), str(r[2]), str(r[3]), json.loads(str(r[4])),
                    str(r[5]), int(str(r[6])), None if r[7] is None else str(r[7]),
                    None if r[8] is None else str(r[8]))  # fmt: skip


def claim_due(conn: Conn, owner: str, lease_s: float, limit: int = 20) -> list[Delivery]:
    """Pending deliveries due now and not held by a live lease, now held by ``owner`` for
    ``lease_s``. Due times and leases are on the database's clock, so a worker whose
    own clock is stepped neither sends early nor takes over a live lease."""
    clock = db_clock(conn)
    now, lease_until = iso(clock), iso(clock + timedelta(seconds=lease_s))
    ids = [
        str(r[0])
        for r in execute(
            conn,
            sql(
                "SELECT delivery_id FROM notification_deliveries WHERE status = 'pending'"
                " AND next_attempt_at <= :now AND (lease_until IS NULL OR lease_until < :now)"
                " ORDER BY next_attempt_at, delivery_id LIMIT :n"
            ),
            {"now": now, "n": limit},
        ).all()
    ]
    claimed: list[Delivery] = []
    for d in ids:  # each claim re-checks, so two workers never hold one delivery
        row = execute(
            conn,
            sql(
                "UPDATE notification_deliveries SET lease_owner = :o, lease_until = :u"  # noqa: S608
                " WHERE delivery_id = :d AND status = 'pending'"
                " AND (lease_until IS NULL OR lease_until < :now)"
                f" RETURNING {_COLUMNS}"
            ),
            {"o": owner, "u": lease_until, "d": d, "now": now},
        ).first()
        if row is not None:
            claimed.append(_delivery(tuple(row)))
    return claimed


def mark_delivered(conn: Conn, delivery: str, owner: str) -> None:
    execute(
        conn,
        sql(
            "UPDATE notification_deliveries SET status = 'delivered', attempts = attempts + 1,"
            " delivered_at = :t, lease_owner = NULL, lease_until = NULL, last_error = NULL"
            " WHERE delivery_id = :d AND lease_owner = :o"
        ),
        {"t": now_iso(), "d": delivery, "o": owner},
    )


def mark_failed(
    conn: Conn, delivery: str, owner: str, *, error: str, retry_in_s: float, give_up: bool
) -> None:
    """Record a failed attempt; the next is due ``retry_in_s`` from now by the
    database's clock (or never, when given up)."""
    next_attempt_at = iso(db_clock(conn) + timedelta(seconds=retry_in_s))
    execute(conn,
        sql(
            "UPDATE notification_deliveries SET attempts = attempts + 1, last_error = :e,"
            " next_attempt_at = :n, status = :s, lease_owner = NULL, lease_until = NULL"
            " WHERE delivery_id = :d AND lease_owner = :o"
        ),
        {"e": error[:500], "n": next_attempt_at, "s": "given_up" if give_up else "pending",
         "d": delivery, "o": owner},
    )  # fmt: skip


def deliveries_of(conn: Conn, run_id: str) -> list[Delivery]:
    rows = execute(
        conn,
        sql(
            f"SELECT {_COLUMNS} FROM notification_deliveries WHERE run_id = :r"  # noqa: S608
            " ORDER BY created_at, delivery_id"
        ),
        {"r": run_id},
    ).all()
    return [_delivery(tuple(r)) for r in rows]


@dataclass(frozen=True)
class WaitingApproval:
    run_id: str
    policy_profile: str
    seq: int  # the run.phase event that started the wait
    since: str
    recipe: str
    objective: str
    submitted_by: str
    plan_digest: str | None
    # When the wait ends and denies the plan (None: a run from before runs were
    # split, which waits in place; its workflow knows its deadline).
    expires_at: str | None = None


def waiting_approvals(conn: Conn) -> list[WaitingApproval]:
    """Runs waiting for a decision now, with the event that began the wait."""
    rows = execute(
        conn,
        sql(
            "SELECT r.run_id, r.policy_profile, e.seq, e.at, r.recipe, r.objective,"
            " r.submitted_by, r.plan_digest, r.parked_until"
            " FROM runs r JOIN run_events e ON e.run_id = r.run_id"
            " WHERE r.status = 'waiting_approval' AND e.kind = 'run.phase'"
            " AND e.seq = (SELECT MAX(seq) FROM run_events x"
            "  WHERE x.run_id = r.run_id AND x.kind = 'run.phase')"
        ),
    ).all()
    return [
        WaitingApproval(str(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), str(r[5]),
                        str(r[6]), None if r[7] is None else str(r[7]),
                        None if r[8] is None else str(r[8]))
        for r in rows
    ]  # fmt: skip
