"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Database, migrate, open_database
from tests.conftest import require_backend
from tests.support.stack import BACKENDS, drop_database, fresh_database_url


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on each backend, dropped afterwards."""
    require_backend(request.param)
    url = fresh_database_url(request.param, tmp_path)
    yield url
    drop_database(url)


@pytest.fixture
def db(backend: str, tmp_path: Path) -> Iterator[Database]:
    """A fresh database on each backend with Gatehouse's tables (no worker, no DBOS),
    dropped afterwards."""
    url = fresh_database_url(backend, tmp_path)
    opened = open_database(url)
    migrate(opened)
    try:
        yield opened
    finally:
        opened.dispose()
        drop_database(url)
