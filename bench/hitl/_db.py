"""Reading a benchmark's database from outside the system under test."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from ledger import open_database

__all__ = ["one", "transactions", "tx_per_s"]


def one(url: str, query: str, **params: Any) -> Any:
    """The first column of the first row of ``query`` (a connection of its own)."""
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            return conn.execute(sa.text(query), params).scalar()
    finally:
        db.dispose()


def transactions(url: str) -> float | None:
    """The transactions the database has committed or rolled back (PostgreSQL's
    statistics, which lag by up to 0.5 s); None on SQLite."""
    if url.startswith("sqlite"):
        return None
    query = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :d"
    return float(one(url, query, d=url.rsplit("/", 1)[1]) or 0)


def tx_per_s(url: str, seconds: float) -> float | None:
    """Transactions per second over the next ``seconds`` (PostgreSQL; None on SQLite)."""
    before = transactions(url)
    if before is None:
        return None
    time.sleep(seconds)
    after = transactions(url) or 0.0
    # the two reads are transactions too
    return max(0.0, after - before - 1) / seconds
