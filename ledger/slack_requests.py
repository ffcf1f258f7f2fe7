"""Signed Slack requests already taken (``slack_requests``): each is honoured once.

Slack's signature covers the request's timestamp and body, and the shim honours a
request only within five minutes of its timestamp; the digest of each signature it
took is kept for ``KEEP_S`` (longer than that window), so a copy sent again within
it, to any shim on the database, is refused. Older rows go as new ones come in.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from ledger._db import Conn, iso, sql
from ledger._statement import execute, rows_changed

__all__ = ["KEEP_S", "first_sight"]

KEEP_S = 15 * 60


def first_sight(conn: Conn, signature: str, now: datetime | None = None) -> bool:
    """Record the request signed ``signature``: True the first time, False when it
    was already taken (a replay). Rows past ``KEEP_S`` are removed on the way."""
    at = now or datetime.now(UTC)
    execute(
        conn,
        sql("DELETE FROM slack_requests WHERE received_at < :old"),
        {"old": iso(at - timedelta(seconds=KEEP_S))},
    )
    done = execute(
        conn,
        sql(
            "INSERT INTO slack_requests (signature_sha256, received_at) VALUES (:s, :t)"
            " ON CONFLICT (signature_sha256) DO NOTHING"
        ),
        {"s": hashlib.sha256(signature.encode("utf-8")).hexdigest(), "t": iso(at)},
    )
    return rows_changed(done) == 1
