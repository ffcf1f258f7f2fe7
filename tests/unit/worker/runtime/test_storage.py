"""``ledger.storage_full``: a full disk, however it arrives, and nothing else."""

from __future__ import annotations

import errno
import inspect
import sqlite3
from pathlib import Path

import psycopg
import pytest
from dbos import _datasource
from dbos._datasource import SQLAlchemyDatasource, _is_retriable_db_error
from sqlalchemy.exc import OperationalError

from contracts import ErrorCode, GatehouseError
from ledger import database_unreachable, no_space, storage_full
from worker.durable._dbos import wait_out_full_disk


def _wrapped(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("a step failed") from exc
    except RuntimeError as outer:
        return outer


FULL: dict[str, BaseException] = {
    "sqlite": sqlite3.OperationalError("database or disk is full"),
    "sqlalchemy": OperationalError(
        "INSERT", {}, sqlite3.OperationalError("database or disk is full")
    ),
    "ENOSPC": OSError(errno.ENOSPC, "No space left on device"),
    "EDQUOT": OSError(errno.EDQUOT, "Disk quota exceeded"),
    "translated": no_space("the anchor file", OSError(errno.ENOSPC, "full")),
    "wrapped": _wrapped(OSError(errno.ENOSPC, "No space left on device")),
    # What psycopg raises for "could not extend file ...: No space left on device"
    "postgres": OperationalError("INSERT", {}, psycopg.errors.DiskFull("could not extend")),
    "postgres, bare": psycopg.errors.DiskFull("could not extend file"),
}
NOT_FULL: dict[str, BaseException] = {
    "locked": OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked")),
    "EACCES": PermissionError(errno.EACCES, "Permission denied"),
    "other code": GatehouseError(ErrorCode.DATABASE_UNAVAILABLE, "away"),
    "bug": ValueError("a bug"),
    # PostgreSQL's other "insufficient resources" codes are not a full disk
    "postgres, no memory": OperationalError("SELECT", {}, psycopg.errors.OutOfMemory("oom")),
    "postgres, too many": psycopg.errors.TooManyConnections("too many clients"),
}


@pytest.mark.parametrize("name", sorted(FULL))
def test_a_full_disk_is_recognised(name: str) -> None:
    assert storage_full(FULL[name])


@pytest.mark.parametrize("name", sorted(NOT_FULL))
def test_nothing_else_is(name: str) -> None:
    assert not storage_full(NOT_FULL[name])


def test_the_translation_carries_a_retry_hint() -> None:
    exc = no_space("the anchor file", OSError(errno.ENOSPC, "full"))
    assert exc.code is ErrorCode.STORAGE_FULL and exc.code.http_status == 507
    assert exc.code.retryable and exc.details["retry_after_s"] == 5


def test_a_full_sqlite_file_also_counts_as_unreachable_for_retries() -> None:
    # The workers' retry loops wait a full database out like a lost one.
    assert database_unreachable(FULL["sqlalchemy"])


# DBOS is pinned (pyproject); these fail loudly if an upgrade moves what
# ``worker.durable._dbos.wait_out_full_disk`` leans on, instead of full disks quietly
# failing runs for good again.


def test_a_datasource_told_so_takes_a_full_disk_for_transient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not registered with DBOS: a DBOS another test launched in this process would refuse
    # it (datasources come before launch), and the hook under test does not need it.
    monkeypatch.setattr(_datasource, "_register_datasource", lambda ds: None)
    ds = SQLAlchemyDatasource.create(f"sqlite:///{tmp_path / 'ds.sqlite'}")
    try:
        full = FULL["sqlalchemy"]
        assert isinstance(full, Exception)
        assert not _is_retriable_db_error(full, ds._is_serialization_error)  # DBOS alone
        wait_out_full_disk(ds)
        assert _is_retriable_db_error(full, ds._is_serialization_error)
        locked = NOT_FULL["locked"]
        assert isinstance(locked, Exception)
        assert _is_retriable_db_error(locked, ds._is_serialization_error)  # DBOS's own kept
        bug = NOT_FULL["bug"]
        assert isinstance(bug, Exception)
        assert not _is_retriable_db_error(bug, ds._is_serialization_error)
    finally:
        ds.engine.dispose()


def test_dbos_transactions_still_ask_the_instance_hook() -> None:
    # The sync and async transaction loops each decide "retry or record" (and their
    # execution checks "retry or raise") through the instance's hook; were it called
    # on the class, or renamed, the patch would change nothing.
    source = inspect.getsource(_datasource)
    calls = source.count("_is_retriable_db_error(")
    asks = source.count("self._is_serialization_error")
    assert calls >= 5 and asks >= 4, (calls, asks)
