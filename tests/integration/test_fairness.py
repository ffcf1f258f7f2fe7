"""Fairness: one submitter's work holds at most its share of a worker's slots.

The queue is partitioned by submitter (``contracts.queue_partition``) and a
worker runs at most ``GATEHOUSE_WORKER_SHARE`` workflows of one partition at
once. Here a worker of 4 slots gives each submitter 2: alice's four approved
runs block in their step (a test handler holds them), two at a time, while a
run max submits afterwards still gets a slot and starts. alice's plans waiting
for a decision hold nothing. Work queued with no partition key (as an older
release queued it) is put in ``LEGACY_PARTITION`` by the leader's tick and runs.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from contracts import LEGACY_PARTITION, DriverKind
from contracts.execution import ExecutionEnvelope, ExecutionResult
from tests.conftest import require_backend
from tests.support.plans import NOTE, digest_of_plan
from tests.support.stack import BACKENDS, Stack, running_stack
from worker.handlers import HandlerContext, noop
from worker.handlers.registry import HANDLERS

CONCURRENCY, SHARE = 4, 2
WAIT_S = 30.0


class Turnstile:
    """A noop handler that holds each step until released, noting whose it is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.inside: list[str] = []

    def handler(self, envelope: ExecutionEnvelope, context: HandlerContext) -> ExecutionResult:
        with self.lock:
            self.inside.append(str(envelope.arguments.get("who")))
        self.release.wait(120)
        return noop.run(envelope, context)

    def held(self) -> Counter[str]:
        with self.lock:
            return Counter(self.inside)

    def until(self, what: str, done: Any) -> Counter[str]:
        deadline = time.monotonic() + WAIT_S
        while not done(self.held()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: the steps held are {dict(self.held())}")
            time.sleep(0.02)
        return self.held()


@pytest.fixture(params=BACKENDS)
def fair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, Turnstile]]:
    require_backend(request.param)
    gate = Turnstile()
    env = {"GATEHOUSE_WORKER_CONCURRENCY": str(CONCURRENCY), "GATEHOUSE_WORKER_SHARE": str(SHARE)}
    try:
        with running_stack(
            request.param,
            tmp_path_factory.mktemp(f"fair-{request.param}"),
            worker_env=env,
            handlers={**HANDLERS, DriverKind.NOOP: gate.handler},
        ) as s:
            yield s, gate
    finally:
        gate.release.set()


def _submit(stack: Stack, who: str) -> tuple[str, dict[str, Any]]:
    plan = {"objective": f"{who}'s", "steps": [{**NOTE, "step_id": "n", "input": {"who": who}}]}
    body = {"recipe": "echo", "objective": f"{who}'s", "mode": "run-plan", "plan": plan}
    r = stack.client.post("/intent", json=body, headers=stack.auth(who))
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id, plan


def _approve(stack: Stack, run_id: str, plan: dict[str, Any]) -> None:
    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)}, headers=stack.auth("bob")
    )
    assert r.status_code == 200, r.text


def _keys(stack: Stack, run_ids: list[str]) -> dict[str, str | None]:
    """Each run's latest stretch's partition key, as DBOS holds it."""
    rows = stack.sql(f"SELECT workflow_uuid, queue_partition_key FROM {stack.workflow_table}")
    return {str(w).split(":")[0]: k for w, k in sorted(rows) if str(w).split(":")[0] in run_ids}


def test_one_submitter_holds_at_most_its_share(fair: tuple[Stack, Turnstile]) -> None:
    stack, gate = fair
    waiting = [_submit(stack, "alice")[0] for _ in range(3)]  # left for a decision
    alices = [_submit(stack, "alice") for _ in range(4)]
    for run_id, plan in alices:
        _approve(stack, run_id, plan)
    gate.until("alice's runs reach their step", lambda h: h["alice"] >= SHARE)

    # max comes later, behind alice's backlog, and is not kept waiting for it
    max_run, max_plan = _submit(stack, "max")
    _approve(stack, max_run, max_plan)
    held = gate.until("max's run starts", lambda h: h["max"] == 1)
    assert held["alice"] == SHARE, held  # two of alice's four approved runs wait their turn
    keys = _keys(stack, [r for r, _ in alices] + [max_run])
    assert keys[max_run] == "max" and {keys[r] for r, _ in alices} == {"alice"}, keys
    queued = _enqueued(stack, [r for r, _ in alices])
    assert len(queued) == len(alices) - SHARE, queued
    for run_id in waiting:  # a plan waiting for people holds no slot and no share
        assert stack.run(run_id)["status"] == "waiting_approval"

    # as an older release queued work: no partition key, which DBOS never claims
    # from a partitioned queue; the leader's tick gives them one, and they start.
    # One statement: a tick between two would key one and leave the other to the next
    stretches = {f"w{i}": f"{r}:1" for i, r in enumerate(queued)}
    stack.execute(
        f"UPDATE {stack.workflow_table} SET queue_partition_key = NULL"
        f" WHERE workflow_uuid IN ({', '.join(':' + k for k in stretches)})"
        " AND status = 'ENQUEUED'",
        **stretches,
    )
    gate.until("the unkeyed work starts", lambda h: h["alice"] == SHARE + 1)
    assert set(_keys(stack, queued).values()) == {LEGACY_PARTITION}

    gate.release.set()
    for run_id in [r for r, _ in alices] + [max_run]:
        assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"


def _enqueued(stack: Stack, run_ids: list[str]) -> list[str]:
    """Those of these runs whose stretch DBOS holds queued, unclaimed."""
    rows = stack.sql(f"SELECT workflow_uuid FROM {stack.workflow_table} WHERE status = 'ENQUEUED'")
    return [r for r in run_ids if f"{r}:1" in {str(w) for (w,) in rows}]
