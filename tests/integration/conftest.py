"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Database, migrate, open_database
from tests.conftest import require_backend
from tests.support.stack import BACKENDS, Stack, drop_database, fresh_database_url, running_stack


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


@pytest.fixture(scope="module", params=BACKENDS)
def tampered_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A stack (worker and shim) whose tests rewrite DBOS's records behind its back, on
    each backend: its runs are not replayed at teardown, since nothing ran them as
    recorded."""
    require_backend(request.param)
    with running_stack(request.param, tmp_path_factory.mktemp("tampered")) as s:
        s.tampered = True
        yield s
