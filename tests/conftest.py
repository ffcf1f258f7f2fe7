"""Shared fixtures. Integration tests run once per database backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import (
    BACKENDS,
    Stack,
    drop_database,
    fresh_database_url,
    postgres_available,
    shim_client,
)


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
    from worker.app import launch, shutdown
    from worker.settings import WorkerSettings

    tmp = tmp_path_factory.mktemp(f"stack-{backend}")
    url = fresh_database_url(backend, tmp)
    workspace = tmp / "workspaces"
    settings = WorkerSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": url,
            "GATEHOUSE_EXECUTOR_ID": f"test-{backend}",
            "GATEHOUSE_WORKSPACE_ROOT": str(workspace),
        }
    )
    launch(settings)
    try:
        with shim_client(url) as client:
            yield Stack(backend=backend, database_url=url, client=client, workspace_root=workspace)
    finally:
        # A run left waiting for a decision holds a DBOS thread in recv (up to the
        # profile's recheck_s) and would poll a database about to be dropped:
        # cancel it and wake it, so its thread ends now.
        from dbos import DBOS

        from contracts import APPROVAL_TOPIC

        for wf in DBOS.list_workflows(status=["PENDING", "ENQUEUED"]):
            DBOS.cancel_workflow(wf.workflow_id)
            DBOS.send(wf.workflow_id, {"wake": True}, APPROVAL_TOPIC)
        shutdown()
        drop_database(url)


@pytest.fixture(scope="session")
def shared_dir() -> Path | None:
    """The ../shared folder CI places beside the repo, if present."""
    here = Path(__file__).resolve().parent.parent.parent / "shared"
    return here if here.is_dir() else None
