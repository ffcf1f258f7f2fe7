"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_backend
from tests.support.stack import BACKENDS, drop_database, fresh_database_url


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on each backend, dropped afterwards."""
    require_backend(request.param)
    url = fresh_database_url(request.param, tmp_path)
    yield url
    drop_database(url)
