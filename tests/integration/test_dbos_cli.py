"""The DBOS CLI against a Gatehouse database, run from the project folder with no flags.

``dbos-config.yaml`` at the top level names the application and takes its
database from ``GATEHOUSE_DATABASE_URL``, so ``dbos workflow list`` finds
Gatehouse's runs (a run is split at its decisions: its first stretch's
workflow id is the run id, each later stretch's ``RUN_ID:N``), ``dbos
workflow steps`` names each step, and ``dbos workflow queue list`` shows
intents no worker has taken yet.
DBOS-side actions that would go around Gatehouse's guarantees are refused
(a fork made through DBOS) or end where Gatehouse's own would (a resume of a
cancelled run runs nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import migrate, open_database
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import Stack, drop_database, fresh_database_url, shim_client

ROOT = Path(__file__).resolve().parents[2]
DBOS = Path(sys.executable).with_name("dbos")


def dbos(url: str, *args: str) -> Any:
    """``dbos ARGS`` in the project folder, the database named only by the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBOS_")}
    out = subprocess.run(
        [str(DBOS), *args],
        cwd=ROOT,
        env={**env, "GATEHOUSE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else None


def _submitted(stack: Stack, steps: int = 2) -> tuple[str, str]:
    plan = noop_plan(steps)
    r = stack.submit({"recipe": "echo", "objective": "dbos cli", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    assert stack.wait(run_id, {"waiting_approval"})["status"] == "waiting_approval"
    # parked: its first stretch ended (a decision before that is taken in it instead)
    assert _dbos_status(stack.database_url, run_id) == "SUCCESS"
    return run_id, digest_of_plan(plan)


def _succeeded(stack: Stack) -> str:
    run_id, digest = _submitted(stack)
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    stack.wait(run_id, {"succeeded"})
    assert _dbos_status(stack.database_url, f"{run_id}:1") == "SUCCESS"
    return run_id


def _dbos_status(url: str, workflow_id: str, timeout: float = 30) -> str:
    """The workflow's DBOS status once it is no longer queued or running."""
    deadline = time.monotonic() + timeout
    while True:
        status = str(dbos(url, "workflow", "get", workflow_id)["status"])
        if status not in ("ENQUEUED", "PENDING") or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def test_the_config_file_names_the_application_and_its_database() -> None:
    text = (ROOT / "dbos-config.yaml").read_text(encoding="utf-8")
    assert "name: gatehouse" in text
    assert "system_database_url: ${GATEHOUSE_DATABASE_URL}" in text


def test_list_and_steps_with_no_flags(stack: Stack) -> None:
    done = _succeeded(stack)
    waiting, digest = _submitted(stack)
    rejected, digest2 = _submitted(stack)
    r = stack.client.post(f"/reject/{rejected}", json={"plan_digest": digest2})
    assert r.status_code == 200, r.text
    stack.wait(rejected, {"rejected"})
    assert _dbos_status(stack.database_url, f"{rejected}:1") == "SUCCESS"
    found = dbos(stack.database_url, "workflow", "list", "-l", "500")
    listed = {w["workflow_id"]: w for w in found}
    # the status mapping is docs/operators.md's: a run waiting for a decision holds
    # no workflow (its first stretch ended SUCCESS, parked); each decision starts
    # the next stretch, RUN_ID:N, whose output is how the run ended
    for run_id in (done, waiting, rejected):
        assert listed[run_id]["status"] == "SUCCESS"
        assert listed[run_id]["name"] == "gatehouse.intent"
        assert listed[run_id]["output"]["status"] == "parked"
    assert f"{waiting}:1" not in listed
    assert listed[f"{done}:1"]["status"] == "SUCCESS"
    assert listed[f"{done}:1"]["name"] == "gatehouse.stretch"
    assert listed[f"{done}:1"]["output"]["status"] == "succeeded"
    assert listed[f"{rejected}:1"]["output"]["status"] == "rejected"
    # DBOS holds no step of a run: its calls are the ledger's rows and its records
    # Gatehouse's own, each with its checkpoint in the record's transaction
    for workflow_id in (done, f"{done}:1"):
        assert dbos(stack.database_url, "workflow", "steps", workflow_id) == []
    assert stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r", r=done)[0][0] == 2
    assert stack.sql("SELECT COUNT(*) FROM run_steps WHERE run_id = :r", r=done)[0][0] == 2
    ok = stack.client.post(f"/approve/{waiting}", json={"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    stack.wait(waiting, {"succeeded"})


def test_a_fork_made_through_dbos_is_refused(stack: Stack) -> None:
    parent = _succeeded(stack)
    before = stack.sql("SELECT COUNT(*) FROM calls")[0][0]
    # a copy of the stretch after the approval, run again from its start
    stretch = f"{parent}:1"
    forked = dbos(stack.database_url, "workflow", "fork", stretch, "--step", "1")
    fork_id = str(forked["workflow_id"])
    assert _dbos_status(stack.database_url, fork_id) == "ERROR"
    error = dbos(stack.database_url, "workflow", "get", fork_id)
    assert "has no Gatehouse run" in json.dumps(error)
    assert stack.sql("SELECT COUNT(*) FROM runs WHERE run_id = :r", r=fork_id)[0][0] == 0
    assert stack.sql("SELECT COUNT(*) FROM calls")[0][0] == before  # nothing was called


def test_a_resumed_cancelled_run_runs_nothing(stack: Stack) -> None:
    run_id, _digest = _submitted(stack)
    r = stack.client.post(f"/runs/{run_id}/cancel", json={"reason": "not today"})
    assert r.status_code == 200, r.text
    stack.wait(run_id, {"cancelled"})
    stretch = f"{run_id}:1"  # the stretch the cancel handed the parked run to
    assert _dbos_status(stack.database_url, stretch) == "CANCELLED"
    dbos(stack.database_url, "workflow", "resume", stretch)
    ended = _dbos_status(stack.database_url, stretch)
    # it ran again, met the cancel at its next boundary and ended cancelled again
    assert ended == "CANCELLED", ended
    assert stack.run(run_id)["status"] == "cancelled"
    assert stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r", r=run_id)[0][0] == 0


@pytest.fixture
def shim_only(backend: str, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A shim and a database with no worker: intents stay in the queue."""
    url = fresh_database_url(backend, tmp_path)
    db = open_database(url)
    migrate(db)
    db.dispose()
    try:
        with shim_client(url) as client:
            yield url, client
    finally:
        drop_database(url)


def test_queue_list_shows_intents_no_worker_took(shim_only: tuple[str, Any]) -> None:
    url, client = shim_only
    body = {"recipe": "echo", "objective": "queued", "mode": "run-plan", "plan": noop_plan(1)}
    ids = []
    for _ in range(2):
        r = client.post("/intent", json=body)
        assert r.status_code == 202, r.text
        ids.append(str(r.json()["run_id"]))
    queued = dbos(url, "workflow", "queue", "list")
    assert {w["workflow_id"] for w in queued} == set(ids)
    assert {w["queue_name"] for w in queued} == {"intentQ"}
    assert {w["status"] for w in queued} == {"ENQUEUED"}


def test_a_resumed_finished_run_calls_nothing_again(stack: Stack) -> None:
    run_id = _succeeded(stack)
    before = stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r", r=run_id)[0][0]
    for workflow_id in (run_id, f"{run_id}:1"):
        dbos(stack.database_url, "workflow", "resume", workflow_id)
        assert _dbos_status(stack.database_url, workflow_id) == "SUCCESS"
    assert stack.run(run_id)["status"] == "succeeded"
    assert stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r", r=run_id)[0][0] == before
