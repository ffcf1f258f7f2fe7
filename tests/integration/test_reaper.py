"""A worker killed for good: the reaper in a live worker hands its runs over.

Worker ``doomed`` takes an approved run and is SIGKILLed while the run's step
is held by its callee; it never comes back. Worker ``survivor`` (another
executor id) sees the stale heartbeat, marks ``doomed`` reaped, re-enqueues its
PENDING workflows (the run's stretch after its approval), adopts the run (an
episode says so), and finishes it, the held call sent again under its key. (A
run waiting for its approval holds no workflow: there is nothing to adopt.)
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from shim.local import start_worker, stop
from tests.integration.test_approval import HeldService
from tests.support.stack import shim_client

FAST = {"GATEHOUSE_HEARTBEAT_S": "0.5", "GATEHOUSE_DEAD_AFTER_S": "3"}


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_dead_workers_run_is_adopted(db_url: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    with shim_client(db_url) as client, HeldService() as held:
        doomed = start_worker(db_url, "doomed", ws, tmp_path / "doomed.log", FAST)
        survivor = None
        try:
            plan = {
                "objective": "reaper",
                "steps": [held.step()],
            }
            body = {"recipe": "echo", "objective": "reaper", "mode": "run-plan", "plan": plan}
            run_id = client.post("/intent", json=body).json()["run_id"]
            view = _until(
                lambda: (
                    (v := client.get(f"/runs/{run_id}").json())["status"] == "waiting_approval"
                    and v
                ),
                60,
                "the plan card",
            )
            digest = view["plan_card"]["plan_digest"]
            assert (
                client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
            )
            assert held.arrived.wait(timeout=60), "the approved run never reached its step"
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(timeout=10)
            killed_at = time.monotonic()

            survivor = start_worker(db_url, "survivor", ws, tmp_path / "survivor.log", FAST)
            olga = client.people.auth("olga")

            def adopted() -> list[dict[str, Any]]:
                eps = client.get(f"/runs/{run_id}/episodes", headers=olga).json()["episodes"]
                return [e for e in eps if e["episode_type"] == "execution/adoption"]

            adoption = _until(adopted, 60, "the adoption episode")[0]
            print(f"adopted {time.monotonic() - killed_at:.1f} s after the kill")
            details = adoption["body"]["result_details"]
            assert details["from_executor"] == "doomed" and details["by"] == "survivor"
            held.release.set()
            done = _until(
                lambda: (
                    (v := client.get(f"/runs/{run_id}").json())["status"] in ("succeeded", "failed")
                    and v
                ),
                60,
                "the run to end",
            )
            assert done["status"] == "succeeded", done
            tool_calls = [
                c
                for c in client.get(f"/runs/{run_id}/ledger").json()["calls"]
                if c["kind"] == "tool"
            ]
            assert len(tool_calls) == 1  # one entry: sent again under the same key
            # an adopted run replays from its ledger like any other (the survivor answers)
            replayed = client.post(
                f"/runs/{run_id}/replay", headers=client.people.auth("olga")
            ).json()
            assert replayed["match"] is True, replayed
        finally:
            stop([p for p in (doomed, survivor) if p is not None])
