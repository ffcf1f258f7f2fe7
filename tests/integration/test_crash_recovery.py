"""Named crash points by handler: each case ends with its exact expected outcome.

Real worker processes. Worker A runs with ``GATEHOUSE_CRASH_POINT`` and exits
like ``kill -9`` at that point; worker B starts under the same executor id,
DBOS recovers the PENDING workflow, and the re-executed step goes through the
ledger. Keyed callees are called again with the same op_key; an interrupted
call to a callee without keys stops the run in ``needs_operator`` until an
operator resolves it. The inventory service counts what it receives; every
run then replays from its ledger to the same trace digest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ledger import open_database
from ledger.bundle import bundle_bytes, export_bundle
from ledger.bundle_verify import verify_bundle
from ledger.signing import generate_key, load_signing_key
from shim.local import InventoryService, start_worker, stop
from tests.support.plans import digest_of_plan
from tests.support.stack import (
    shim_client,
    wait_for_status,
)


def _step(handler: str, base_url: str) -> dict[str, Any]:
    """The one step of a case's plan, for each handler."""
    if handler == "noop":
        return {
            "step_id": "target",
            "verb": "note",
            "connector_id": "note",
            "driver_kind": "noop",
            "input": {"text": "hello"},
        }
    if handler in ("http", "http-unkeyed"):
        return {
            "step_id": "target",
            "verb": "fetch",
            "connector_id": "local-http" if handler == "http" else "local-http-unkeyed",
            "driver_kind": "http",
            "input": {"url": f"{base_url}/inventory.json"},
        }
    return {
        "step_id": "target",
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": ["echo", "hello"]},
    }


# Callees that de-duplicate on the op_key (or have no effect): an interrupted
# call is sent again with the same key. The others are in doubt.
KEYED = {"noop", "http"}
HANDLERS = ["noop", "http", "http-unkeyed", "restricted_shell"]
CALL_POINTS = ["before_claim", "after_claim", "after_effect", "after_completion"]


def _expected(point: str, handler: str) -> tuple[str | None, int, int]:
    """(operator resolution needed, requests the service sees, ledger rows for the step).

    * before_claim: nothing was claimed; the call runs once on recovery.
    * after_claim: claimed, not sent. Keyed: sent on recovery. Unkeyed: in
      doubt; the truth is "not applied", so it is sent again as attempt 2.
    * after_effect: sent, not recorded. Keyed: sent again with the same key
      (the callee applies it once). Unkeyed: in doubt; the truth is "applied".
    * after_completion: recorded; the recovered step is served from the ledger.
    """
    if point == "after_claim" and handler not in KEYED:
        return "not_applied", 1, 2
    if point == "after_effect" and handler not in KEYED:
        return "applied", 1, 1
    if point == "after_effect" and handler == "http":
        return None, 2, 1
    return None, 1, 1


CASES = [(p, h) for p in CALL_POINTS for h in HANDLERS] + [
    ("approval_wait", "http"),
    ("after_approval", "http"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "handler"), CASES)
def test_crash_point(db_url: str, tmp_path: Path, point: str, handler: str) -> None:
    workspaces = tmp_path / "ws"
    resolution, requests, rows = _expected(point, handler)
    run_point = point in ("approval_wait", "after_approval")
    with InventoryService() as inventory, shim_client(db_url) as client:
        plan = {"objective": "crash test", "steps": [_step(handler, inventory.base_url)]}
        digest = digest_of_plan(plan)
        r = client.post(
            "/intent",
            json={"recipe": "echo", "objective": "crash test", "mode": "run-plan", "plan": plan},
        )
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        if point != "approval_wait":
            assert (
                client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
            )

        crashing = start_worker(
            db_url,
            "crash-w",
            workspaces,
            tmp_path / "a.log",
            {"GATEHOUSE_CRASH_POINT": f"{point}:{'@run' if run_point else 'target'}"},
        )
        try:
            assert crashing.wait(timeout=90) == 137, (tmp_path / "a.log").read_text()
        finally:
            stop([crashing])
        mid = _read(client, run_id)
        assert mid["status"] == ("waiting_approval" if point == "approval_wait" else "running")
        if point == "approval_wait":
            assert (
                client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
            )

        recovering = start_worker(db_url, "crash-w", workspaces, tmp_path / "b.log")
        try:
            if resolution is not None:
                waiting = wait_for_status(
                    lambda rid: _read(client, rid), run_id, {"needs_operator"}, timeout=90
                )
                assert waiting["phase"] == "operator"
                # a run in doubt waits as rows only: parked at the call, no workflow
                doubt = _doubt(client, run_id)
                assert _parked_at(db_url, run_id) == doubt["op_key"]
                resolved = client.post(
                    f"/calls/{doubt['op_key']}/resolve",
                    json={"outcome": resolution, "note": "checked the callee's log"},
                    headers=client.people.auth("olga"),
                )
                assert resolved.status_code == 200, resolved.text
                assert resolved.json()["resolved_by"] == "olga"
            done = wait_for_status(
                lambda rid: _read(client, rid), run_id, {"succeeded", "failed"}, timeout=90
            )
            assert done["status"] == "succeeded", done
            replayed = client.post(f"/runs/{run_id}/replay", headers=client.people.auth("olga"))
            assert replayed.status_code == 200, replayed.text
            assert replayed.json()["match"] is True, replayed.json()
        finally:
            stop([recovering])

        assert inventory.count("/inventory.json") == (requests if "http" in handler else 0)
        if handler == "http":
            assert inventory.effects("/inventory.json") == 1  # one key, one effect
        calls = [c for c in _ledger(client, run_id) if c["step_id"] == "target"]
        assert len(calls) == rows
        statuses = sorted(c["status"] for c in calls)
        if resolution == "not_applied":
            assert statuses == ["completed", "not_applied"]
        elif resolution == "applied":
            assert statuses == ["applied"]
            episodes = client.get(f"/runs/{run_id}/episodes").json()["episodes"]
            kinds = {e["episode_type"] for e in episodes}
            assert {"execution/call_in_doubt", "execution/operator_resolution"} <= kinds
        else:
            assert statuses == ["completed"]
        # what the ledger says of how often each was handed to its callee
        sent_again = point in ("after_claim", "after_effect") and handler in KEYED
        for c in calls:
            assert c["sends"] == (2 if sent_again else 1), c
            assert len(c["resends"]) == c["sends"] - 1, c
        if sent_again:
            [again] = calls[0]["resends"]
            assert again["executor_id"] == "crash-w" and "interrupted" in again["why"], again
            # the callee heard it no more often than the ledger says it was sent
            if "http" in handler:
                assert inventory.count("/inventory.json") <= calls[0]["sends"]
            # the evidence bundle says so too, and still verifies
            assert _bundled_resends(db_url, tmp_path, run_id) == {calls[0]["op_key"]: [again]}
        chain = client.get(
            f"/runs/{run_id}/ledger/verify", headers=client.people.auth("olga")
        ).json()
        assert chain["ok"] is True, chain  # a crash never forks or breaks the chain


def _ledger(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/runs/{run_id}/ledger")
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["calls"]
    return out


def _read(client: TestClient, run_id: str) -> dict[str, Any]:
    r = client.get(f"/runs/{run_id}")
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _doubt(client: TestClient, run_id: str) -> dict[str, Any]:
    [doubt] = [c for c in _ledger(client, run_id) if c["status"] == "in_doubt"]
    return doubt


def _parked_at(url: str, run_id: str) -> str | None:
    """Where the run is parked (None: not within 30 s); its status comes a moment first."""
    db = open_database(url)
    deadline = time.monotonic() + 30
    try:
        while True:
            with db.engine.connect() as conn:
                row = conn.execute(
                    sa.text("SELECT parked_wait, parked_at FROM runs WHERE run_id = :r"),
                    {"r": run_id},
                ).one()
            if row[0] is not None:
                return str(row[1])
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)
    finally:
        db.dispose()


@pytest.mark.slow
def test_a_cancel_after_a_completed_call_stops_the_recovered_run_at_the_next_step(
    db_url: str, tmp_path: Path
) -> None:
    """The ledger is a call's checkpoint: a workflow re-executed after a crash runs its
    calls again and is answered from their rows. A cancel written meanwhile (no worker
    running) does not stop a call already made at its boundary: the step it settled
    stays done, and the run stops at the next step's boundary, which is never called."""
    workspaces = tmp_path / "ws"
    with InventoryService() as inventory, shim_client(db_url) as client:
        # the first step's boundary is the decision's; the call cut off is the second's
        first = {**_step("noop", inventory.base_url), "step_id": "first"}
        after = {**_step("noop", inventory.base_url), "step_id": "after"}
        plan = {
            "objective": "cancel after a call",
            "steps": [first, _step("http", inventory.base_url), after],
        }
        digest = digest_of_plan(plan)
        body = {"recipe": "echo", "objective": "cancel", "mode": "run-plan", "plan": plan}
        r = client.post("/intent", json=body)
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        assert client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
        crashing = start_worker(
            db_url,
            "cancel-w",
            workspaces,
            tmp_path / "a.log",
            {"GATEHOUSE_CRASH_POINT": "after_completion:target"},
        )
        try:
            assert crashing.wait(timeout=90) == 137, (tmp_path / "a.log").read_text()
        finally:
            stop([crashing])
        cancel = client.post(f"/runs/{run_id}/cancel", json={"reason": "after the call"})
        assert cancel.status_code in (200, 202), cancel.text
        recovering = start_worker(db_url, "cancel-w", workspaces, tmp_path / "b.log")
        try:
            done = wait_for_status(
                lambda rid: _read(client, rid), run_id, {"cancelled", "succeeded", "failed"}, 90
            )
            assert done["status"] == "cancelled", done
            assert [(s["step_id"], s["status"]) for s in done["steps"]] == [
                ("first", "succeeded"),
                ("target", "succeeded"),
            ], done["steps"]
            replayed = client.post(f"/runs/{run_id}/replay", headers=client.people.auth("olga"))
            assert replayed.status_code == 200, replayed.text
            assert replayed.json()["match"] is True, replayed.json()
        finally:
            stop([recovering])
        assert [(c["step_id"], c["status"]) for c in _ledger(client, run_id)] == [
            ("first", "completed"),
            ("target", "completed"),
        ]
        assert inventory.effects("/inventory.json") == 1
    # the boundary the run stopped at: the next step's, not the one whose call was made
    db = open_database(db_url)
    try:
        with db.engine.connect() as conn:
            seen = conn.execute(
                sa.text("SELECT observed_at FROM run_cancels WHERE run_id = :r"), {"r": run_id}
            ).all()
    finally:
        db.dispose()
    assert seen == [("after",)], seen


def _bundled_resends(db_url: str, tmp: Path, run_id: str) -> object:
    """The ``resends`` of the run's evidence bundle, exported and verified offline."""
    public = generate_key(tmp / "bundle.key", tmp / "bundle.pub")
    key = load_signing_key((tmp / "bundle.key").read_bytes())
    db = open_database(db_url)
    try:
        with db.engine.connect() as conn:
            bundle = export_bundle(conn, run_id, key)
    finally:
        db.dispose()
    assert bundle is not None
    report = verify_bundle(bundle_bytes(bundle), public)
    assert report.ok, report.problem
    content = bundle["content"]
    assert isinstance(content, dict)
    return content.get("resends")
