"""A worker killed mid-call: the step re-executes without calling twice.

Real worker processes. Worker A runs with ``GATEHOUSE_CRASH_POINT`` and exits
like ``kill -9`` at that point; worker B starts under the same executor id,
DBOS recovers the PENDING workflow, and the re-executed step goes through the
ledger. The inventory service counts what it receives.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from contracts import Plan, digest_of
from shim._fixture import InventoryService
from shim._procs import start_worker, stop
from tests.conftest import require_backend
from tests.support.stack import (
    BACKENDS,
    drop_database,
    fresh_database_url,
    shim_client,
    wait_for_status,
)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    require_backend(request.param)
    url = fresh_database_url(request.param, tmp_path)
    yield url
    drop_database(url)


def _plan(base_url: str) -> dict[str, Any]:
    return {
        "objective": "fetch and checksum",
        "steps": [
            {
                "step_id": "fetch",
                "verb": "fetch",
                "connector_id": "local-http",
                "driver_kind": "http",
                "input": {"url": f"{base_url}/inventory.json", "save_as": "inventory.json"},
            },
            {
                "step_id": "checksum",
                "verb": "run",
                "connector_id": "workspace-shell",
                "driver_kind": "restricted_shell",
                "input": {"argv": ["sha256sum", "inventory.json"]},
            },
        ],
    }


CASES = [
    # (crash point, step, final status, requests seen, distinct effects, fetch ledger status)
    ("after_claim", "fetch", "succeeded", 1, 1),
    ("after_effect", "fetch", "succeeded", 2, 1),  # re-sent with the same Idempotency-Key
    ("after_completion", "fetch", "succeeded", 1, 1),  # served from the ledger
    ("after_completion", "checksum", "succeeded", 1, 1),
    ("after_effect", "checksum", "failed", 1, 1),  # no idempotency key: in doubt, not re-run
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "step", "final", "requests", "effects"), CASES)
def test_crash_point(
    db_url: str, tmp_path: Path, point: str, step: str, final: str, requests: int, effects: int
) -> None:
    workspaces = tmp_path / "ws"
    with InventoryService() as inventory, shim_client(db_url) as client:
        plan = _plan(inventory.base_url)
        digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
        r = client.post(
            "/intent",
            json={
                "recipe": "echo",
                "objective": "crash test",
                "mode": "run-plan",
                "plan": plan,
            },
        )
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        assert client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200

        crashing = start_worker(
            db_url,
            "crash-w",
            workspaces,
            tmp_path / "a.log",
            {"GATEHOUSE_CRASH_POINT": f"{point}:{step}"},
        )
        try:
            assert crashing.wait(timeout=90) == 137, (tmp_path / "a.log").read_text()
        finally:
            stop([crashing])
        mid = _read(client, run_id)
        assert mid["status"] == "running"

        recovering = start_worker(db_url, "crash-w", workspaces, tmp_path / "b.log")
        try:
            done = wait_for_status(
                lambda rid: _read(client, rid), run_id, {"succeeded", "failed"}, timeout=90
            )
        finally:
            stop([recovering])

        assert done["status"] == final, done
        assert inventory.count("/inventory.json") == requests
        assert inventory.effects("/inventory.json") == effects
        calls = client.get(f"/runs/{run_id}/ledger").json()["calls"]
        by_step = {c["step_id"]: c for c in calls}
        assert len([c for c in calls if c["step_id"] == "fetch"]) == 1
        assert by_step["fetch"]["status"] == "completed"
        chain = client.get(
            f"/runs/{run_id}/ledger/verify", headers=client.people.auth("olga")
        ).json()
        assert chain["ok"] is True, chain  # a crash never forks or breaks the chain
        if final == "failed":
            assert done["error_code"] == "call_in_doubt"
            assert by_step["checksum"]["status"] == "started"  # left for an operator
        else:
            assert by_step["checksum"]["status"] == "completed"


def _read(client: TestClient, run_id: str) -> dict[str, Any]:
    r = client.get(f"/runs/{run_id}")
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out
