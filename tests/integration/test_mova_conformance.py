"""Every episode Gatehouse writes is a MOVA 4.1.1 episode, checked against upstream's files.

Runs on both backends. The episodes of real runs (a full cycle, a rejected
plan) and every security event row are validated against upstream's own
schemas in ``../shared/mova-4.1.1`` (skipped when absent) and against this
project's ``vendor/mova-4.1.1``.

Upstream's ``ds.security_event_episode_core_v1`` is unsatisfiable as
published (``allOf`` of two closed branches, each rejecting the other's
fields), so a security episode is checked as its core part against
upstream's episode core and as a whole against upstream's security branch
with ``additionalProperties: false`` relaxed to also allow the core's
fields; see ``tests/support/mova.py``. Core episodes are checked against
upstream's episode core as they are, nothing dropped.

This module's worker has the scripted model, so a finished run can be
explained and its ``execution/explain`` episodes checked too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shim.local import InventoryService
from tests.support.mova import Upstream, is_security, load_upstream, vendor_errors
from tests.support.scripted_model import ScriptedModel
from tests.support.stack import Stack, running_stack

STEPS = ["announce", "fetch", "checksum", "size", "report"]
REPORT = {
    "headline": "Inventory checked",
    "summary": "Five steps ran after bob approved the plan; all succeeded.",
    "steps": [{"step_id": step, "note": "succeeded"} for step in STEPS],
    "concerns": [],
}


@pytest.fixture(scope="module")
def stack(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The shared stack, with the scripted model as the worker's model (for explain)."""
    with (
        ScriptedModel([{"content": REPORT}]) as model,
        running_stack(
            backend,
            tmp_path_factory.mktemp(f"mova-{backend}"),
            {"GATEHOUSE_MODEL_BASE_URL": model.base_url, "GATEHOUSE_MODEL_NAME": "scripted"},
        ) as built,
    ):
        yield built


@pytest.fixture(scope="module")
def upstream(shared_dir: Path | None) -> Upstream:
    if shared_dir is None or not (shared_dir / "mova-4.1.1").is_dir():
        pytest.skip("../shared/mova-4.1.1 (upstream MOVA 4.1.1) is absent: no conformance check")
    return load_upstream(shared_dir)


@pytest.fixture
def inventory() -> Iterator[InventoryService]:
    with InventoryService() as svc:
        yield svc


def _problems(upstream: Upstream, body: dict[str, Any]) -> list[str]:
    return [f"upstream: {p}" for p in upstream.errors(body)] + [
        f"vendor: {p}" for p in vendor_errors(body)
    ]


def _check_all(upstream: Upstream, bodies: list[dict[str, Any]]) -> None:
    bad = {
        b.get("episode_type", "?") + " " + b.get("episode_id", "?"): _problems(upstream, b)
        for b in bodies
    }
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, json.dumps(bad, indent=2)


def _waiting_run(stack: Stack, inventory: InventoryService) -> tuple[str, str]:
    r = stack.submit(
        {
            "recipe": "demo-inventory",
            "objective": "Check the demo warehouse inventory",
            "parameters": {"base_url": inventory.base_url},
            "mode": "full-cycle",
            "submitted_by": "alice",
        }
    )
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    waiting = stack.wait(run_id, {"waiting_approval", "failed"})
    assert waiting["status"] == "waiting_approval", waiting
    digest: str = waiting["plan_card"]["plan_digest"]
    return run_id, digest


def _episodes(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    r = stack.client.get(f"/runs/{run_id}/episodes")
    assert r.status_code == 200, r.text
    rows: list[dict[str, Any]] = r.json()["episodes"]
    for row in rows:
        body = row["body"]
        # The row's columns say what its body says.
        assert row["episode_id"] == body["episode_id"]
        assert row["episode_type"] == body["episode_type"]
        assert row["result_status"] == body["result_status"]
        assert row["recorded_at"] == body["recorded_at"]
    return rows


def test_every_episode_of_a_full_run_conforms(
    upstream: Upstream, stack: Stack, inventory: InventoryService
) -> None:
    run_id, digest = _waiting_run(stack, inventory)
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest, "decided_by": "bob"})
    assert r.status_code == 200, r.text
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done

    rows = _episodes(stack, run_id)
    types = sorted(row["episode_type"] for row in rows)
    assert len(rows) == 8, types  # plan, approval, 5 steps, run summary
    assert types.count("plan/agent_plan") == 1
    assert types.count("execution/approval") == 1
    assert types.count("execution/run_summary") == 1
    assert sorted(row["step_id"] for row in rows if row["step_id"]) == sorted(STEPS)
    assert not any(is_security(row["body"]) for row in rows)
    _check_all(upstream, [row["body"] for row in rows])


def test_every_episode_of_a_rejected_run_conforms(
    upstream: Upstream, stack: Stack, inventory: InventoryService
) -> None:
    run_id, digest = _waiting_run(stack, inventory)
    r = stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest, "decided_by": "bob"})
    assert r.status_code == 200, r.text
    stack.wait(run_id, {"rejected"})
    rows = _episodes(stack, run_id)
    types = {row["episode_type"] for row in rows}
    assert {"plan/agent_plan", "execution/approval"} <= types, types
    _check_all(upstream, [row["body"] for row in rows])


def test_every_episode_of_an_explained_run_conforms(
    upstream: Upstream, stack: Stack, inventory: InventoryService
) -> None:
    run_id, digest = _waiting_run(stack, inventory)
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest, "decided_by": "bob"})
    assert r.status_code == 200, r.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 200, r.text
    rows = _episodes(stack, run_id)
    explains = [row for row in rows if row["episode_type"] == "execution/explain"]
    assert [row["result_status"] for row in explains] == ["completed"]
    assert explains[0]["step_id"] == "@explain"
    _check_all(upstream, [row["body"] for row in rows])


def test_security_events_and_every_stored_episode_conform(upstream: Upstream, stack: Stack) -> None:
    """A refused request (the plan names a command the pool does not allow) may leave a
    security event row; whatever rows there are, and every episode row, must conform."""
    plan = {
        "objective": "refuse me",
        "steps": [
            {
                "step_id": "only",
                "verb": "run",
                "connector_id": "workspace-shell",
                "driver_kind": "restricted_shell",
                "input": {"argv": ["rm", "-rf", "/"]},
            }
        ],
    }
    r = stack.submit({"recipe": "echo", "objective": "refuse me", "mode": "run-plan", "plan": plan})
    assert 400 <= r.status_code < 500, r.text

    events = [json.loads(raw) for (raw,) in stack.sql("SELECT body_json FROM security_events")]
    assert all(is_security(body) for body in events)
    _check_all(upstream, events)
    # as served too: the row's repeat_count and last_seen_at ride in result_details
    served = stack.client.get("/security-events", headers=stack.auth("olga"))
    assert served.status_code == 200, served.text
    listed = served.json()["security_events"]
    assert listed and all("repeat_count" in e["result_details"] for e in listed)
    _check_all(upstream, listed)

    stack.finished_run(objective="episodes of its own")  # standing alone, it has one run too
    stored = [json.loads(raw) for (raw,) in stack.sql("SELECT body_json FROM episodes")]
    assert stored, "a finished run left no episodes"
    _check_all(upstream, stored)
