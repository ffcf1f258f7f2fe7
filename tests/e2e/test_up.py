"""End to end: ``gatehouse up`` on PostgreSQL — shim and workers as separate OS
processes, driven over HTTP. Both workers are killed with SIGKILL while the
run waits for approval; the supervisor restarts them, DBOS recovers the
workflow, and the run still ends exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from contracts import Role
from shim.cli.client import ApiError, Client
from shim.local import InventoryService, free_port
from shim.tokens import add_token


def _pids(log: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for m in re.finditer(r"worker (worker-\d+) pid (\d+)", log.read_text()):
        found[m.group(1)] = int(m.group(2))
    return found


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_up_survives_worker_kills(pg_url: str, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "up.log"
    gatehouse = Path(sys.executable).parent / "gatehouse"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [
                str(gatehouse),
                "up",
                "--database-url",
                pg_url,
                "--port",
                str(port),
                "--workers",
                "2",
                "--var",
                str(tmp_path / "var"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    tokens = tmp_path / "var" / "local-tokens.txt"
    _wait_for(tokens.exists, 60, "gatehouse up to make its local identities")
    people = dict(line.split() for line in tokens.read_text().splitlines())
    _wait_for(lambda: "dashboard at" in log.read_text(), 60, "gatehouse up to name its shim")
    assert f"gatehouse up: dashboard at {base}/dashboard" in log.read_text()
    api = Client(base, people["local-submitter"])
    approver = Client(base, people["local-approver"])
    try:
        _wait_for(lambda: len(_pids(log)) == 2, 90, "two workers to start")
        with InventoryService() as inventory:
            accepted = api.submit(
                {
                    "recipe": "demo-inventory",
                    "objective": "e2e over HTTP",
                    "parameters": {"base_url": inventory.base_url},
                }
            )
            run_id = accepted.run_id
            view = api.wait(run_id, {"waiting_approval", "failed"}, 60)
            assert view.status.value == "waiting_approval", view
            assert view.plan_card is not None

            first = _pids(log)
            for pid in first.values():
                os.kill(pid, signal.SIGKILL)
            _wait_for(
                lambda: all(_pids(log)[k] != first[k] for k in first), 60, "workers to restart"
            )

            # the submitter holds no approver role (four-eyes proper: test_access.py)
            with pytest.raises(ApiError) as refused:
                api.decide(run_id, True, view.plan_card.plan_digest)
            assert refused.value.code == "forbidden"
            approver.decide(run_id, True, view.plan_card.plan_digest)
            done = api.wait(run_id, {"succeeded", "failed"}, 90)
            assert done.status.value == "succeeded", done
            assert inventory.count("/inventory.json") == 1
            calls = api.ledger(run_id)
            assert [c.status for c in calls] == ["completed"] * 6

            # the CLI, as an operator would: verify the chain, replay the run (a worker
            # serves every call from the ledger; the inventory hears nothing), fork it
            token = people["local-approver"]
            env = {**os.environ, "GATEHOUSE_URL": base, "GATEHOUSE_TOKEN": token}
            verify = subprocess.run(
                [str(gatehouse), "ledger", "verify", run_id],
                env=env,
                capture_output=True,
                check=False,
            )
            assert verify.returncode == 0, verify.stderr
            replay = subprocess.run(
                [str(gatehouse), "replay", run_id, "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert replay.returncode == 0, replay.stdout + replay.stderr
            assert '"match": true' in replay.stdout
            assert inventory.count("/inventory.json") == 1
            fork = subprocess.run(
                [str(gatehouse), "runs", "fork", run_id, "--from-step", "2", "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert fork.returncode == 0, fork.stdout + fork.stderr
            # a fork is a new execution: its own plan card, decided by a third person
            # (neither the fork's requester nor the parent's submitter)
            child_id = json.loads(fork.stdout)["run_id"]
            card = api.wait(child_id, {"waiting_approval", "failed"}, 90)
            assert card.plan_card is not None, card
            with pytest.raises(ApiError) as same:
                approver.decide(child_id, True, card.plan_card.plan_digest)
            assert same.value.code == "four_eyes"
            reviewer = add_token(tmp_path / "var" / "tokens.json", "reviewer", [Role.APPROVER])
            third = Client(base, reviewer)

            def decided() -> bool:  # once the shim has re-read its tokens file (≤ 1 s)
                try:
                    assert card.plan_card is not None
                    third.decide(child_id, True, card.plan_card.plan_digest)
                except ApiError as exc:
                    if exc.code != "unauthorized":
                        raise
                    return False
                return True

            try:
                _wait_for(decided, 10, "the shim to know the new token")
            finally:
                third.close()
            child = api.wait(child_id, {"succeeded", "failed"}, 90)
            assert child.status.value == "succeeded", child
            assert child.parent_run_id == run_id and child.fork_from_step == 2

        # bad input over real HTTP: a stable code, not a 500
        headers = {"content-type": "application/json"}
        r = httpx.post(f"{base}/intent", content=b"{}", headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        headers["Authorization"] = f"Bearer {people['local-submitter']}"
        r = httpx.post(f"{base}/intent", content=b"{nope", headers=headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
        assert "restarting" in log.read_text()
    finally:
        api.close()
        approver.close()
        up.send_signal(signal.SIGTERM)
        try:
            assert up.wait(timeout=30) == 0, log.read_text()
        finally:
            if up.poll() is None:
                up.kill()
    for pid in _pids(log).values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
