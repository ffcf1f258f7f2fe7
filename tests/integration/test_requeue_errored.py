"""A run a full disk stopped, whose error DBOS managed to record, is put back on the
queue (``ledger.executors.requeue_errored``, called by ``worker.durable``) and runs
on from its checkpoints; a run that has ended is never touched. Both databases."""

from __future__ import annotations

import time

import pytest

from contracts import INTENT_QUEUE
from ledger import executors, open_database
from tests.support.stack import Stack


@pytest.fixture
def stack(tampered_stack: Stack) -> Stack:
    return tampered_stack


def _status(stack: Stack, run_id: str) -> str:
    rows = stack.sql(
        f"SELECT status FROM {stack.workflow_table} WHERE workflow_uuid = :w", w=run_id
    )
    return str(rows[0][0])


def _runs_on_to_the_end(stack: Stack, run_id: str, workflow_id: str | None = None) -> None:
    """Back on the queue, the run's workflow (its first stretch unless told) runs on
    from its checkpoints: it ends again (DBOS ``SUCCESS``), and none of its two calls
    ran twice."""
    workflow_id = workflow_id or run_id
    deadline = time.monotonic() + 60
    while _status(stack, workflow_id) != "SUCCESS" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _status(stack, workflow_id) == "SUCCESS"
    calls = stack.sql(
        "SELECT COUNT(*), COUNT(DISTINCT op_key) FROM calls WHERE run_id = :r", r=run_id
    )
    assert calls[0][0] == calls[0][1] == 2


def test_an_errored_unfinished_run_goes_back_on_the_queue_and_ends(stack: Stack) -> None:
    run_id = stack.finished_run(2, "requeue")
    db = open_database(stack.database_url)
    try:
        stack.execute(
            f"UPDATE {stack.workflow_table} SET status = 'ERROR' WHERE workflow_uuid = :w", w=run_id
        )
        with db.engine.begin() as conn:  # the run has ended: left alone
            assert executors.requeue_errored(conn, run_id, INTENT_QUEUE) is False
        assert _status(stack, run_id) == "ERROR"
        # As a full disk leaves it: DBOS says ERROR, the run never ended.
        stack.execute("UPDATE runs SET finished_at = NULL WHERE run_id = :r", r=run_id)
        with db.engine.begin() as conn:
            assert executors.requeue_errored(conn, run_id, INTENT_QUEUE) is True
        _runs_on_to_the_end(stack, run_id)
        with db.engine.begin() as conn:  # SUCCESS now: nothing to do
            assert executors.requeue_errored(conn, run_id, INTENT_QUEUE) is False
    finally:
        db.dispose()


def test_the_leader_requeues_a_full_disk_error_whose_worker_is_gone(stack: Stack) -> None:
    """The worker that saw the disk fill up keeps the run in memory only; were it to
    die first, the reaper's leader still finds the run by DBOS's recorded error.
    An ``ERROR`` for any other reason is not put back: the run ends ``failed``
    (``test_stopped_runs``), DBOS's record of the error kept."""
    full = stack.finished_run(2, "orphan")
    bug = stack.finished_run(2, "bug")
    # The disk filled up during the steps: in the stretch that ran them, the one after
    # the approval, unless the approval came in before the first stretch parked (then
    # that stretch read it and went on: the run has one stretch).
    stretch = stack.sql("SELECT stretch FROM runs WHERE run_id = :r", r=full)[0][0]
    steps_at = f"{full}:{stretch}" if stretch else full
    errors = {
        steps_at: '{"name": "OperationalError", "message": "database or disk is full"}',
        bug: '{"name": "ValueError", "message": "a bug"}',
    }
    for workflow_id, error in errors.items():
        stack.execute(
            f"UPDATE {stack.workflow_table} SET status = 'ERROR', error = :e"
            " WHERE workflow_uuid = :w",
            e=error,
            w=workflow_id,
        )
        stack.execute(
            "UPDATE runs SET finished_at = NULL WHERE run_id = :r", r=workflow_id.split(":")[0]
        )
    stack.execute("UPDATE runs SET status = 'running' WHERE run_id = :r", r=bug)
    _runs_on_to_the_end(stack, full, steps_at)
    assert stack.wait(bug, {"failed"}, timeout=30)["error_code"] == "workflow_lost"
    assert _status(stack, bug) == "ERROR"
