"""The shim's answer while the database is away: 503 ``database_unavailable``,
however the loss reaches a route — never a 500. No database needed: a service
whose database connections fail the way a lost database makes them fail."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from dbos._error import DBOSException
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from contracts import ErrorCode, Role
from ledger import open_database
from shim.api import Service, create_app
from shim.settings import ShimSettings
from shim.tokens import add_token


def _wrapped_dbos() -> Exception:
    try:
        try:
            raise OperationalError("SELECT 1", {}, psycopg.OperationalError("connection failed"))
        except OperationalError as exc:
            raise DBOSException("could not enqueue") from exc
    except DBOSException as outer:
        return outer


LOSSES: dict[str, Callable[[], Exception]] = {
    "sqlalchemy OperationalError": lambda: OperationalError(
        "SELECT 1", {}, psycopg.OperationalError("connection failed: Connection refused")
    ),
    "invalidated DBAPIError": lambda: DBAPIError(
        "SELECT 1", {}, Exception("server closed the connection"), connection_invalidated=True
    ),
    "sqlalchemy InterfaceError": lambda: InterfaceError("SELECT 1", {}, Exception("closed")),
    "pool timeout": lambda: PoolTimeout("QueuePool limit of size 5 overflow 5 reached"),
    "psycopg OperationalError": lambda: psycopg.OperationalError("the database is starting up"),
    "DBOS error caused by one": _wrapped_dbos,
}


class _LostDatabase(Service):
    """Every connection to its database fails with ``loss()``: reads, writes and the
    refusal records alike."""

    def __init__(self, settings: ShimSettings, loss: Callable[[], Exception]) -> None:
        self.settings = settings
        self.db = open_database(settings.database_url)
        self.refusals = threading.Lock()

        @event.listens_for(self.db.engine, "do_connect")
        def _lost(*_: Any) -> None:
            raise loss()

    def close(self) -> None:
        self.db.dispose()


def _client(tmp_path: Path, loss: Callable[[], Exception]) -> tuple[TestClient, str]:
    tokens = tmp_path / "tokens.json"
    token = add_token(tokens, "olga", [Role.OPERATOR])
    sam = add_token(tokens, "sam", [Role.SUBMITTER])
    settings = ShimSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": f"sqlite:///{tmp_path / 'never-reached.sqlite'}",
            "GATEHOUSE_TOKENS_FILE": str(tokens),
        }
    )
    app = create_app(settings, lambda s: _LostDatabase(s, loss))
    client = TestClient(app, raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {token}"
    return client, sam


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_lost_database_is_503_however_it_is_wrapped(tmp_path: Path, name: str) -> None:
    client, _ = _client(tmp_path, LOSSES[name])
    with client:
        r = client.get("/runs")
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == ErrorCode.DATABASE_UNAVAILABLE.value


def test_a_refusal_stands_when_its_record_cannot_be_written(tmp_path: Path) -> None:
    client, sam = _client(tmp_path, LOSSES["invalidated DBAPIError"])
    with client:
        # a submitter may list its own runs, not read the policies: refused
        r = client.get("/policies", headers={"Authorization": f"Bearer {sam}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_anything_else_is_still_a_500(tmp_path: Path) -> None:
    client, _ = _client(tmp_path, lambda: ValueError("a bug"))
    with client:
        r = client.get("/runs")
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"


def _full_disk() -> Exception:
    return OperationalError(
        "INSERT INTO runs", {}, sqlite3.OperationalError("database or disk is full")
    )


def _full_disk_under_dbos() -> Exception:
    try:
        try:
            raise _full_disk()
        except OperationalError as exc:
            raise DBOSException("could not enqueue") from exc
    except DBOSException as outer:
        return outer


@pytest.mark.parametrize("loss", [_full_disk, _full_disk_under_dbos], ids=["plain", "under DBOS"])
def test_a_full_disk_is_507_storage_full_with_retry_after(
    tmp_path: Path, loss: Callable[[], Exception]
) -> None:
    """SQLite's "database or disk is full" is an OperationalError too, but it is not a
    lost database: waiting for the database will not help, freeing space will."""
    client, _ = _client(tmp_path, loss)
    with client:
        r = client.get("/runs")
    assert r.status_code == 507, r.text
    error = r.json()["error"]
    assert error["code"] == ErrorCode.STORAGE_FULL.value and error["retryable"] is True
    assert int(r.headers["Retry-After"]) > 0
