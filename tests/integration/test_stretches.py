"""A person's wait costs nothing: a run waiting for a decision holds no workflow.

Real worker processes, both databases. A run is split at every human
decision: the stretch that reaches a plan nobody has decided on parks the run
(rows only) and its workflow ends, so waiting plans hold no queue slot and no
thread. The decision hands the run to its next stretch in the transaction that
records it, so a decision made while no worker runs is executed, once, when
one starts. A wait past its expiry is ended by the reaper's sweep, with no
workflow waiting it out, and a late decision is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ledger import open_database, work_queue
from shim.local import start_worker, stop
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import Stack, shim_client, wait_for_status
from worker.durable import wakes_heard
from worker.records import SUPERSEDED, decision_or_park
from worker.runtime import WorkerSettings

# Fewer slots than waiting plans: were a waiting plan to hold one, nothing else would run.
SLOTS = 2
WAITING = 3 * SLOTS


def _sql(url: str, query: str, **params: Any) -> list[tuple[Any, ...]]:
    db = open_database(url)
    try:
        with db.engine.begin() as conn:
            result = conn.execute(sa.text(query), params)
            return [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        db.dispose()


def _workflows(url: str, status: str) -> int:
    table = "workflow_status" if url.startswith("sqlite") else "dbos.workflow_status"
    return int(_sql(url, f"SELECT COUNT(*) FROM {table} WHERE status = :s", s=status)[0][0])


def _until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.1)


def _read(client: TestClient, run_id: str) -> dict[str, Any]:
    r = client.get(f"/runs/{run_id}")
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _wait(client: TestClient, run_id: str, statuses: set[str]) -> dict[str, Any]:
    return wait_for_status(lambda rid: _read(client, rid), run_id, statuses, timeout=90)


def _submit(client: TestClient, steps: int = 2) -> tuple[str, str]:
    plan = noop_plan(steps, objective="a plan that waits")
    body = {"recipe": "echo", "objective": "waits", "mode": "run-plan", "plan": plan}
    r = client.post("/intent", json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"]), digest_of_plan(plan)


def _parked(url: str) -> int:
    return int(_sql(url, "SELECT COUNT(*) FROM runs WHERE parked_wait IS NOT NULL")[0][0])


@contextmanager
def _worker(url: str, tmp: Path, name: str) -> Iterator[None]:
    proc = start_worker(
        url,
        "stretch-w",
        tmp / "ws",
        tmp / f"{name}.log",
        {"GATEHOUSE_WORKER_CONCURRENCY": str(SLOTS)},
    )
    try:
        yield
    finally:
        stop([proc])


def test_waiting_plans_hold_no_slot_and_decisions_wait_for_no_worker(
    db_url: str, tmp_path: Path
) -> None:
    with shim_client(db_url) as client:
        with _worker(db_url, tmp_path, "first"):
            waiting = [_submit(client) for _ in range(WAITING)]
            _until(lambda: _parked(db_url) == WAITING, f"{WAITING} runs are parked")
            # rows only: no workflow is queued, running or blocked for any of them
            _until(lambda: _workflows(db_url, "PENDING") == 0, "no workflow is pending")
            assert _workflows(db_url, "ENQUEUED") == 0
            # the worker's slots are free for anyone else's run
            other, digest = _submit(client)
            _until(lambda: _parked(db_url) == WAITING + 1, "the other run is parked")
            ok = client.post(f"/approve/{other}", json={"plan_digest": digest})
            assert ok.status_code == 200, ok.text
            assert _wait(client, other, {"succeeded", "failed"})["status"] == "succeeded"

        # Every worker is down: decisions are rows and queued stretches, nothing lost.
        approved, (rejected, r_digest), (cancelled, _), left = (
            waiting[:3],
            waiting[3],
            waiting[4],
            waiting[5][0],
        )
        for run_id, digest in approved:
            ok = client.post(f"/approve/{run_id}", json={"plan_digest": digest})
            assert ok.status_code == 200, ok.text
        no = client.post(f"/reject/{rejected}", json={"plan_digest": r_digest})
        assert no.status_code == 200, no.text
        stopped = client.post(f"/runs/{cancelled}/cancel", json={"reason": "not now"})
        assert stopped.status_code == 200, stopped.text
        assert _workflows(db_url, "ENQUEUED") == 5
        assert _parked(db_url) == 1
        for run_id, _digest in approved:
            # decided in the approval's transaction (the card approved, the run running);
            # its next stretch waits in the queue for a worker
            seen = _read(client, run_id)
            assert (seen["status"], seen["plan_card"]["status"]) == ("running", "approved"), seen

        with _worker(db_url, tmp_path, "second"):
            for run_id, _digest in approved:
                assert _wait(client, run_id, {"succeeded", "failed"})["status"] == "succeeded"
            assert _wait(client, rejected, {"rejected", "failed"})["status"] == "rejected"
            assert _wait(client, cancelled, {"cancelled", "failed"})["status"] == "cancelled"
            assert _read(client, left)["status"] == "waiting_approval"
            for run_id, _digest in [*approved, (other, "")]:
                calls = client.get(f"/runs/{run_id}/ledger").json()["calls"]
                assert sorted(c["step_id"] for c in calls) == ["s1", "s2"]  # each once
                # two stretches (the plan card, then the steps) replay as one run
                replayed = client.post(f"/runs/{run_id}/replay", headers=client.people.auth("olga"))
                assert replayed.status_code == 200, replayed.text
                assert replayed.json()["match"] is True, replayed.json()
            assert _parked(db_url) == 1


def test_an_expired_wait_ends_its_run_with_nothing_waiting_it_out(
    db_url: str, tmp_path: Path
) -> None:
    with shim_client(db_url) as client, _worker(db_url, tmp_path, "expiry"):
        run_id, digest = _submit(client)
        _until(lambda: _parked(db_url) == 1, "the run is parked")
        [(until,)] = _sql(db_url, "SELECT parked_until FROM runs WHERE run_id = :r", r=run_id)
        assert until is not None  # the profile's approval timeout from the park
        _until(lambda: _workflows(db_url, "PENDING") == 0, "no workflow is pending")
        # the deadline passes (moved, as a day would pass)
        _sql(
            db_url,
            "UPDATE runs SET parked_until = '2000-01-01T00:00:00.000Z' WHERE run_id = :r",
            r=run_id,
        )
        late = client.post(f"/approve/{run_id}", json={"plan_digest": digest})
        assert late.status_code in (408, 409), late.text
        assert late.json()["error"]["code"] in ("approval_timeout", "run_not_awaiting_approval")
        done = _wait(client, run_id, {"failed", "succeeded"})
        assert (done["status"], done["error_code"]) == ("failed", "approval_timeout")
        assert done["plan_card"]["status"] == "expired"
        assert done["approvals"] == []
        assert client.get(f"/runs/{run_id}/ledger").json()["calls"] == []


def test_workers_hear_of_new_work_at_once(stack: Stack) -> None:
    """A worker is told of an intent and of a decision's hand-off by a notification
    sent with it (PostgreSQL NOTIFY; SQLite a datagram within the host), and claims
    the work then, not at its next poll."""
    before = wakes_heard()
    stack.finished_run(steps=1)
    assert wakes_heard() > before


def test_work_nobody_was_told_of_is_found_by_the_heartbeats_look(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work queued with no notification (DBOS's own re-queues, or one sent while a
    worker's listening connection was down) is found: by the heartbeat's look at the
    queue, which has the worker look at every partition then (or by a pass already
    under way), not only by its last-resort pass."""
    monkeypatch.setattr(work_queue, "notify_work", lambda _conn, _partition: None)
    # The intake's own statement notifies on PostgreSQL (intents.take_intent), on the
    # channel named here; the worker listens on the real one already.
    monkeypatch.setattr(work_queue, "WORK_CHANNEL", "gatehouse_nobody_listens")
    heard = wakes_heard()
    plan = noop_plan(1, objective="untold")
    r = stack.submit({"recipe": "echo", "objective": "untold", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    stack.wait(str(r.json()["run_id"]), {"waiting_approval"}, timeout=20)
    assert wakes_heard() == heard  # no notification woke it


def test_a_stale_execution_of_a_handed_on_stretch_does_nothing(db_url: str, tmp_path: Path) -> None:
    """DBOS runs a wait's step again when its checkpoint was lost (a full disk) after
    the park it wrote committed; by then a decision may have handed the run to its
    next stretch. That stale execution must end there: going on too would run the
    run's calls a second time, beside the stretch that has them."""
    with shim_client(db_url) as client, _worker(db_url, tmp_path, "only"):
        run_id, digest = _submit(client)
        _until(lambda: _parked(db_url) == 1, "the run is parked at its decision")
        ok = client.post(f"/approve/{run_id}", json={"plan_digest": digest})
        assert ok.status_code == 200, ok.text
        assert _wait(client, run_id, {"succeeded", "failed"})["status"] == "succeeded"
    before = _sql(db_url, "SELECT * FROM runs WHERE run_id = :r", r=run_id)
    me = WorkerSettings.from_env({"GATEHOUSE_DATABASE_URL": db_url})
    arg: dict[str, Any] = {"run_id": run_id, "plan_digest": digest, "at": "@approval"}
    wait = {"wait": 0, "timeout_s": None, "until": None}
    db = open_database(db_url)
    try:
        with db.engine.begin() as conn:  # the first stretch's wait, run again
            assert decision_or_park(conn, {**arg, **wait, "stretch": 0}, me) == SUPERSEDED
        with db.engine.begin() as conn:  # the stretch the run was handed to reads on
            taken = decision_or_park(conn, {**arg, **wait, "stretch": 1}, me)
            assert taken["decision"] == "approved" and "superseded" not in taken
            conn.rollback()
    finally:
        db.dispose()
    assert _sql(db_url, "SELECT * FROM runs WHERE run_id = :r", r=run_id) == before
