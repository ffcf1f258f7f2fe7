"""The two ways a record (``worker.records``) runs as a database step.

* ``tx`` — a DBOS step whose body is one transaction of ours: DBOS looks the
  step up, the body commits, DBOS writes the checkpoint (three transactions).
  A crash between the body's commit and the checkpoint runs the body again,
  so every body run this way writes nothing new the second time.
* ``atomic_tx`` — a DBOS step whose one transaction of ours also reads and writes
  the step's checkpoint in DBOS's datasource table: the rows and the checkpoint
  commit together, for a body that must not run twice (three transactions, as
  ``tx``; DBOS's own ``run_tx_step`` takes five, see ``_checkpointed``). The
  checkpoints stay until the workflow has succeeded; the reaper's leader drops them
  then (``ledger.checkpoints.drop_finished``), where DBOS would delete them
  in one more transaction as each workflow ends.

A full disk rolls a body's transaction back and is waited out in place; a lost
database is retried a few times by DBOS.
"""

from __future__ import annotations

from collections.abc import Callable

from dbos import DBOS, StepOptions

from contracts import JsonObject
from ledger import Conn, database_unreachable, events
from worker.durable._dbos import (
    checkpoint_step,
    running_step,
    step_checkpoint,
)
from worker.durable._state import datasource
from worker.runtime import WorkerSettings, runtime, wait_for_space

__all__ = ["Body", "atomic_tx", "retried", "tx"]

Body = Callable[[Conn, JsonObject, WorkerSettings], JsonObject]


def tx(name: str, body: Body, arg: JsonObject) -> JsonObject:
    """Run ``body`` (idempotent) in one transaction, as the DBOS step ``name``."""
    rt = runtime()

    def once(a: JsonObject) -> JsonObject:
        with rt.db.engine.begin() as conn, events.batched(conn):
            return body(conn, a, rt.settings)

    def step(a: JsonObject) -> JsonObject:
        # A full disk rolls the transaction back (nothing half-written) and is waited out
        # here: the step stays not-complete until its rows (and anchor line) are stored.
        return wait_for_space(name, lambda: once(a))

    return DBOS.run_step(retried(name), step, arg)


def retried(name: str) -> StepOptions:
    """A step's options: tried again (0.5 s, doubling, 6 times) while the database
    cannot be reached."""
    return {
        "name": name,
        "retries_allowed": True,
        "max_attempts": 6,
        "interval_seconds": 0.5,
        "backoff_rate": 2.0,
        "should_retry": database_unreachable,
    }


def atomic_tx(name: str, body: Body, arg: JsonObject) -> JsonObject:
    """Run ``body`` as the DBOS step ``name``, in one transaction with its checkpoint:
    its rows and the workflow's checkpoint commit together."""

    def step(a: JsonObject) -> JsonObject:
        return wait_for_space(name, lambda: _checkpointed(body, a))

    return DBOS.run_step(retried(name), step, arg)


class _RecordedFirstError(Exception):
    """Another execution of the step committed its checkpoint first: roll back."""


def _checkpointed(body: Body, arg: JsonObject) -> JsonObject:
    """``body`` once per step, whatever runs the step again.

    In one transaction: the step's checkpoint read (an execution that committed
    before a crash, or before DBOS recorded the step, answers from it), else the body
    run and its output written as the checkpoint. Two executions of one step at once
    (a worker recovering a workflow another still runs) cannot both commit: the
    checkpoint's key is unique, so the second one's write finds the first's row (on
    PostgreSQL, waiting for its commit), rolls its body back and answers the first's
    output. DBOS's ``run_tx_step`` does the same with the checkpoint read in a
    transaction of its own and a look-up of the workflow's owner before the commit.
    """
    rt = runtime()
    ds = datasource()
    key = running_step()
    try:
        with rt.db.engine.begin() as conn:
            recorded = None if key is None else step_checkpoint(conn, ds, key)
            if recorded is not None:
                return recorded
            with events.batched(conn):  # the run's events in one statement, not one each
                out = body(conn, arg, rt.settings)
            if key is None or checkpoint_step(conn, ds, key, out):
                return out
            raise _RecordedFirstError
    except _RecordedFirstError:
        assert key is not None
        with rt.db.engine.connect() as conn:
            recorded = step_checkpoint(conn, ds, key)
        if recorded is None:
            raise RuntimeError(f"step {key} lost its checkpoint to another execution") from None
        return recorded
