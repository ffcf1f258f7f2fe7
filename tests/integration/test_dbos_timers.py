"""DBOS's own timers on a Gatehouse worker, with DBOS's background jobs thread idle.

A Gatehouse worker does not let DBOS run its background jobs once a second
(``worker.durable._dbos.quiet_background``): the reaper's heartbeat looks whether
one is due (``ledger.executors.waiting``) and only then has the wake thread run
them. What those jobs do must still happen: a workflow enqueued with a delay is
made ready once the delay is over, and an unfinished workflow past its deadline
is cancelled. Both are put on a queue no worker claims from, so the row stays
where the timer left it.
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOSClient, EnqueueOptions
from dbos._serialization import DBOSPortableJSON

from tests.support.stack import Stack

NOBODY = "gatehouse-test-nobody"  # a queue no worker claims from


def _enqueue(stack: Stack, delay_s: float | None = None) -> str:
    options: EnqueueOptions = {"queue_name": NOBODY, "workflow_name": "not-a-gatehouse-workflow"}
    if delay_s is not None:
        options["delay_seconds"] = delay_s
    client = DBOSClient(system_database_url=stack.database_url, serializer=DBOSPortableJSON)
    try:
        handle: Any = client.enqueue(options)
        return str(handle.get_workflow_id())
    finally:
        client.destroy()


def _status(stack: Stack, workflow_id: str) -> str:
    rows = stack.sql(
        f"SELECT status FROM {stack.workflow_table} WHERE workflow_uuid = :w",
        w=workflow_id,
    )
    return str(rows[0][0])


def _becomes(stack: Stack, workflow_id: str, status: str, within_s: float = 20) -> str:
    deadline = time.monotonic() + within_s
    seen = _status(stack, workflow_id)
    while seen != status and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = _status(stack, workflow_id)
    return seen


def test_a_delayed_workflow_is_made_ready_once_its_delay_is_over(stack: Stack) -> None:
    workflow_id = _enqueue(stack, delay_s=1.5)
    assert _status(stack, workflow_id) == "DELAYED"
    assert _becomes(stack, workflow_id, "ENQUEUED") == "ENQUEUED"


def test_a_workflow_past_its_deadline_is_cancelled(stack: Stack) -> None:
    workflow_id = _enqueue(stack)
    assert _status(stack, workflow_id) == "ENQUEUED"
    stack.execute(
        f"UPDATE {stack.workflow_table} SET workflow_deadline_epoch_ms = :at"
        " WHERE workflow_uuid = :w",
        at=time.time_ns() // 1_000_000 - 1_000,
        w=workflow_id,
    )
    assert _becomes(stack, workflow_id, "CANCELLED") == "CANCELLED"
