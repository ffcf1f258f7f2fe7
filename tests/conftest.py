"""Shared fixtures. Integration tests run once per database backend."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import BACKENDS, Stack, postgres_available, running_stack


def require_backend(backend: str) -> None:
    if backend == "postgres" and not postgres_available():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is required in CI and is not reachable")
        pytest.skip("PostgreSQL is not reachable at GATEHOUSE_TEST_PG_URL")


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_backend(name)
    return name


@pytest.fixture(scope="module")
def stack(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A worker in this process plus the shim behind a TestClient, on a fresh database."""
    with running_stack(backend, tmp_path_factory.mktemp(f"stack-{backend}")) as built:
        yield built


@pytest.fixture(scope="session")
def shared_dir() -> Path | None:
    """The ../shared folder CI places beside the repo, if present."""
    here = Path(__file__).resolve().parent.parent.parent / "shared"
    return here if here.is_dir() else None


_exit_status: list[int] = []


def _stop_like_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (``kill``, a CI runner's timeout) ends the session as Ctrl-C does:
    the test's ``finally`` blocks run, so the stacks it started (workers,
    ``gatehouse up``, private PostgreSQL clusters, sinks) are stopped, not left."""
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without joining DBOS's worker threads.

    A workflow that a failed test left waiting for approval sits in a durable
    wait (up to the profile's recheck_s) on a thread the interpreter would join
    at exit, long after its database was dropped. Its state is durable; there is
    nothing to wait for. pytest has printed its report by now.
    """
    if _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])
