"""Readiness with the database away: not ready, and the reason says which check failed."""

from __future__ import annotations

from ledger import open_database
from shim.api.services.health import readiness
from shim.local import free_port


def test_a_database_that_is_away_is_not_ready() -> None:
    db = open_database(f"postgresql://postgres@127.0.0.1:{free_port()}/gatehouse")
    try:
        ready, report = readiness(db, "gatehouse-test", 6.0)
    finally:
        db.dispose()
    assert ready is False
    assert report == {
        "status": "not_ready",
        "checks": {"database": {"ok": False, "reason": "the database cannot be reached"}},
        "reasons": ["the database cannot be reached"],
    }
