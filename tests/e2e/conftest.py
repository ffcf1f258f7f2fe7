"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_backend
from tests.support.stack import drop_database, fresh_database_url


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped after it."""
    require_backend("postgres")
    url = fresh_database_url("postgres", tmp_path)
    yield url
    drop_database(url)
