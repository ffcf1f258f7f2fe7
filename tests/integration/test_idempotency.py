"""Idempotency-Key: one key, one intent, one run, one queued workflow — even under a race.

Every run a test starts is rejected at its plan card, so no workflow is left
waiting when the module's worker shuts down.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from tests.support.stack import Stack, shim_client

THREADS = 8


def intent(nonce: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "recipe": "echo",
        "objective": "Idempotency check",
        "parameters": {"nonce": nonce},
        "mode": "full-cycle",
        "submitted_by": "alice",
    }
    body.update(overrides)
    return body


def row_counts(stack: Stack) -> dict[str, int]:
    tables = ["intents", "runs", "calls", stack.workflow_table]
    return {t: stack.sql(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables}


def rows_for_key(stack: Stack, key: str) -> tuple[int, int, list[str]]:
    """(intents with the key, runs of those intents, their run ids); a key is stored as
    ``SUBMITTER KEY`` (each submitter's own)."""
    n_intents = stack.sql(
        "SELECT COUNT(*) FROM intents WHERE idempotency_key LIKE :k", k=f"% {key}"
    )[0][0]
    run_ids = [
        r[0]
        for r in stack.sql(
            "SELECT r.run_id FROM runs r JOIN intents i ON i.intent_id = r.intent_id"
            " WHERE i.idempotency_key LIKE :k",
            k=f"% {key}",
        )
    ]
    return n_intents, len(run_ids), run_ids


def queued_workflows(stack: Stack, run_id: str) -> int:
    table = stack.workflow_table
    count: int = stack.sql(f"SELECT COUNT(*) FROM {table} WHERE workflow_uuid = :r", r=run_id)[0][0]
    return count


def finish(stack: Stack, run_id: str) -> None:
    """Reject the run at its plan card so it ends terminal."""
    run = stack.wait(run_id, {"waiting_approval", "failed"})
    assert run["status"] == "waiting_approval", run
    r = stack.client.post(
        f"/reject/{run_id}", json={"plan_digest": run["plan_card"]["plan_digest"]}
    )
    assert r.status_code == 200, r.text
    assert stack.wait(run_id, {"rejected", "failed"})["status"] == "rejected"


def test_same_key_same_body_returns_the_same_run(stack: Stack) -> None:
    key = "idem-" + uuid.uuid4().hex
    body = intent(uuid.uuid4().hex)

    first = stack.submit(body, key)
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    second = stack.submit(body, key)
    assert second.status_code == 200, second.text
    assert second.json()["run_id"] == run_id
    assert second.json()["intent_id"] == first.json()["intent_id"]

    assert rows_for_key(stack, key) == (1, 1, [run_id])
    assert queued_workflows(stack, run_id) == 1

    finish(stack, run_id)
    # after the run moved on, a repeat still names it, with its current status
    third = stack.submit(body, key)
    assert third.status_code == 200, third.text
    assert third.json()["run_id"] == run_id
    assert third.json()["status"] == "rejected"
    assert rows_for_key(stack, key) == (1, 1, [run_id])


def test_same_key_different_body_conflicts(stack: Stack) -> None:
    key = "idem-" + uuid.uuid4().hex
    nonce = uuid.uuid4().hex
    first = stack.submit(intent(nonce), key)
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    stack.settle()  # the run compiles in the worker meanwhile; count after it has
    before = row_counts(stack)

    for changed in (
        intent(uuid.uuid4().hex),
        intent(nonce, objective="Something else"),
        intent(nonce, mode="plan-only"),
    ):
        r = stack.submit(changed, key)
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert err["code"] == "idempotency_conflict"
        assert err["details"] == {"run_id": run_id}
        assert row_counts(stack) == before
    # (another submitter's same key is another key: test_a_key_is_its_submitters_own)
    assert rows_for_key(stack, key) == (1, 1, [run_id])
    finish(stack, run_id)


def test_default_fields_spelled_out_are_the_same_body(stack: Stack) -> None:
    """The key guards the request's meaning, not its spelling: defaults count as given."""
    key = "idem-" + uuid.uuid4().hex
    body = intent(uuid.uuid4().hex)
    first = stack.submit(body, key)
    assert first.status_code == 202, first.text
    spelled = body | {"policy_profile": "default", "tool_pool": "default"}
    second = stack.submit(spelled, key)
    assert second.status_code == 200, second.text
    assert second.json()["run_id"] == first.json()["run_id"]
    finish(stack, first.json()["run_id"])


def test_no_key_means_a_new_run_each_time(stack: Stack) -> None:
    body = intent(uuid.uuid4().hex)
    a, b = stack.submit(body), stack.submit(body)
    assert (a.status_code, b.status_code) == (202, 202)
    assert a.json()["run_id"] != b.json()["run_id"]
    for r in (a, b):
        finish(stack, r.json()["run_id"])


def _race(clients: list[Any], body: dict[str, Any], key: str) -> list[Any]:
    barrier = threading.Barrier(len(clients))

    def post(client: Any) -> Any:
        barrier.wait(timeout=30)
        return client.post("/intent", json=body, headers={"Idempotency-Key": key})

    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        return list(pool.map(post, clients))


def _check_race(stack: Stack, answers: list[Any], key: str) -> None:
    assert all(r.status_code in (200, 202) for r in answers), [r.text for r in answers]
    run_ids = {r.json()["run_id"] for r in answers}
    assert len(run_ids) == 1, run_ids
    assert sorted(r.status_code for r in answers) == [200] * (len(answers) - 1) + [202]
    (run_id,) = run_ids
    assert rows_for_key(stack, key) == (1, 1, [run_id])
    assert queued_workflows(stack, run_id) == 1
    finish(stack, run_id)


def test_concurrent_same_key_one_client(stack: Stack) -> None:
    key = "idem-" + uuid.uuid4().hex
    answers = _race([stack.client] * THREADS, intent(uuid.uuid4().hex), key)
    _check_race(stack, answers, key)


def _shims(stack: Stack, n: int) -> Iterator[list[Any]]:
    with ExitStack() as shims:
        yield [
            shims.enter_context(shim_client(stack.database_url, stack.client.people))
            for _ in range(n)
        ]


def test_concurrent_same_key_many_shims(stack: Stack) -> None:
    """Separate shim instances (as separate processes would be) race on one key."""
    key = "idem-" + uuid.uuid4().hex
    for clients in _shims(stack, THREADS):
        answers = _race(clients, intent(uuid.uuid4().hex), key)
    _check_race(stack, answers, key)


def test_a_key_is_its_submitters_own(stack: Stack) -> None:
    """Two submitters may use one key: each gets its own run, and neither's answer (a
    replay or a conflict) names the other's run."""
    key = "shared-" + uuid.uuid4().hex
    body = intent(uuid.uuid4().hex)
    alices = stack.submit(body, key)
    assert alices.status_code == 202, alices.text
    sams = stack.client.post(
        "/intent",
        json=body | {"submitted_by": "sam"},
        headers={**stack.auth("sam"), "Idempotency-Key": key},
    )
    assert sams.status_code == 202, sams.text
    assert sams.json()["run_id"] != alices.json()["run_id"]
    other = intent(uuid.uuid4().hex, submitted_by="sam")  # another body: sam's own conflict
    conflict = stack.client.post(
        "/intent", json=other, headers={**stack.auth("sam"), "Idempotency-Key": key}
    )
    assert conflict.status_code == 409, conflict.text
    assert alices.json()["run_id"] not in conflict.text
    assert conflict.json()["error"]["details"]["run_id"] == sams.json()["run_id"]
    for run_id in (alices.json()["run_id"], sams.json()["run_id"]):
        finish(stack, run_id)


def test_a_key_stored_before_keys_were_scoped_still_answers_its_submitter(stack: Stack) -> None:
    key = "legacy-" + uuid.uuid4().hex
    body = intent(uuid.uuid4().hex)
    first = stack.submit(body, key)
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    # as an earlier release stored it: the bare key
    stack.execute(
        "UPDATE intents SET idempotency_key = :k WHERE idempotency_key LIKE :scoped",
        k=key,
        scoped=f"% {key}",
    )
    again = stack.submit(body, key)
    assert again.status_code == 200 and again.json()["run_id"] == run_id, again.text
    sams = stack.client.post(
        "/intent",
        json=body | {"submitted_by": "sam"},
        headers={**stack.auth("sam"), "Idempotency-Key": key},
    )
    assert sams.status_code == 202 and sams.json()["run_id"] != run_id, sams.text
    for made in (run_id, sams.json()["run_id"]):
        finish(stack, made)
