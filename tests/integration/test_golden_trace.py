"""intent → plan card → approve → succeeded, with the steps and ledger rows expected."""

from __future__ import annotations

from typing import Any

import pytest

from shim.local import InventoryService
from tests.support.stack import Stack


@pytest.fixture
def inventory() -> Any:
    with InventoryService() as svc:
        yield svc


def demo_intent(base_url: str) -> dict[str, Any]:
    return {
        "recipe": "demo-inventory",
        "objective": "Check the demo warehouse inventory",
        "parameters": {"base_url": base_url},
        "mode": "full-cycle",
        "submitted_by": "alice",
    }


def test_golden_trace(stack: Stack, inventory: InventoryService) -> None:
    r = stack.submit(demo_intent(inventory.base_url))
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]

    waiting = stack.wait(run_id, {"waiting_approval", "failed"})
    assert waiting["status"] == "waiting_approval", waiting
    card = waiting["plan_card"]
    assert card["status"] == "waiting_input"
    assert [s["step_id"] for s in card["plan"]["steps"]] == [
        "announce",
        "fetch",
        "checksum",
        "size",
        "report",
    ]
    assert inventory.count("/inventory.json") == 0  # nothing runs before approval

    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": card["plan_digest"], "decided_by": "bob"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["recorded"] is True

    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    steps = {s["step_id"]: s for s in done["steps"]}
    assert [s["step_id"] for s in done["steps"]] == [
        "announce",
        "fetch",
        "checksum",
        "size",
        "report",
    ]
    assert all(s["status"] == "succeeded" for s in done["steps"])
    assert steps["fetch"]["output"]["status"] == 200
    assert steps["checksum"]["output"]["stdout"].endswith("inventory.json\n")
    assert (
        steps["checksum"]["output"]["stdout"].split()[0] == steps["fetch"]["output"]["body_sha256"]
    )
    assert steps["report"]["output"]["echo"]["warehouse"] == "demo"
    assert done["approvals"][0]["decided_by"] == "bob"
    assert inventory.count("/inventory.json") == 1

    ledger = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    assert [(c["kind"], c["step_id"], c["status"]) for c in ledger] == [
        ("provider", "@compile", "completed"),
        ("tool", "announce", "completed"),
        ("tool", "fetch", "completed"),
        ("tool", "checksum", "completed"),
        ("tool", "size", "completed"),
        ("tool", "report", "completed"),
    ]
    assert len({c["op_key"] for c in ledger}) == 6
    assert all(c["response_digest"] for c in ledger)

    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    types = [e["episode_type"] for e in episodes]
    assert "plan/agent_plan" in types and "execution/approval" in types
    assert "execution/run_summary" in types
    assert (
        sum(
            t.startswith("execution/") and t not in ("execution/approval", "execution/run_summary")
            for t in types
        )
        == 5
    )
