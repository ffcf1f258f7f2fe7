"""``ledger.storage_full``: a full disk, however it arrives, and nothing else."""

from __future__ import annotations

import errno
import sqlite3

import psycopg
import pytest
from sqlalchemy.exc import OperationalError

from contracts import ErrorCode, GatehouseError
from ledger import database_unreachable, no_space, storage_full


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
