"""How a record (``worker.records``) runs in a workflow: one transaction, its checkpoint in it.

``tx`` runs the record's body in one transaction of ours that also reads and writes
the record's checkpoint in DBOS's datasource table (``datasource_outputs``): an
execution run again (a crash, a worker recovering the workflow) answers from the
checkpoint and writes nothing; two at once cannot both commit (the checkpoint's key
is unique, the second one's body rolls back). No DBOS step wraps it: one
transaction where a DBOS step around it made three (DBOS's look-up of the step, ours,
DBOS's record of it). Until ``gatehouse-6`` each record was a DBOS step.

A record's checkpoint is keyed by its workflow and its place among the workflow's
records (``begin_records``, at each workflow's start: -1, -2, … in the order the
flow asks, the same in every execution of the same code, as DBOS numbers its own
steps; negative, so never one of DBOS's). The checkpoints stay until the workflow
has succeeded; the reaper's leader drops them then
(``ledger.checkpoints.drop_finished``).

A full disk rolls a body's transaction back and is waited out in place; a lost
database is tried again (``steady``), under the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from itertools import count
from typing import TypeVar

from dbos import DBOS, StepOptions
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from contracts import JsonObject
from ledger import Conn, database_unreachable, events
from worker.durable._dbos import StepKey, checkpoint_step, step_checkpoint, step_start
from worker.durable._state import datasource
from worker.runtime import WorkerSettings, runtime, step_span, wait_for_space

__all__ = ["Body", "begin_records", "retried", "steadily", "steady", "tx"]

Body = Callable[[Conn, JsonObject, WorkerSettings], JsonObject]
T = TypeVar("T")

# How often, and how far apart, work in a workflow's body (a read of settled rows, a
# record, a ledgered call) is tried while the database cannot be reached: 0.5 s
# doubling to 16 s, about 48 s in all.
_READ_ATTEMPTS = 8


def steadily() -> Retrying:
    """The attempts at work in a workflow's body, which no DBOS step retries (a read of
    rows that no longer change, a record, a ledgered call): tried again while the
    database is away, so a restart of the database never ends a stretch in DBOS ERROR.
    Each attempt runs in the caller's own frame: ``for attempt in steadily():`` then
    ``with attempt:`` around the work; anything but a lost database is raised at once."""
    return Retrying(
        retry=retry_if_exception(database_unreachable),
        stop=stop_after_attempt(_READ_ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=16.0),
        reraise=True,
    )


def steady(read: Callable[[], T]) -> T:
    """``read()``, tried as ``steadily`` tries."""
    return steadily()(read)


# The records of the workflow running in this context, numbered as the flow asks.
_records: ContextVar[count[int] | None] = ContextVar("gatehouse_records", default=None)


def begin_records() -> None:
    """At a workflow's start (every execution of it): its records count from -1 again."""
    _records.set(count(1))


def record_key() -> StepKey | None:
    """The next record's checkpoint key in the running workflow; None outside one."""
    numbered = _records.get()
    workflow_id = DBOS.workflow_id
    if numbered is None or not workflow_id:
        return None
    return workflow_id, -next(numbered)


def tx(name: str, body: Body, arg: JsonObject) -> JsonObject:
    """Run ``body`` once per workflow execution's record, in one transaction with its
    checkpoint (see the module)."""
    key = record_key()  # taken once: a try again after a lost database keeps it
    with step_span(name):
        return steady(lambda: wait_for_space(name, lambda: _checkpointed(body, arg, key)))


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


class _RecordedFirstError(Exception):
    """Another execution of the step committed its checkpoint first: roll back."""


def _checkpointed(body: Body, arg: JsonObject, key: StepKey | None) -> JsonObject:
    """``body`` once per record ``key``, whatever runs it again (None: no checkpoint).

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
    try:
        with rt.db.engine.begin() as conn:
            # DBOS's check at a step's start (which this is not) and the checkpoint, read as one
            recorded = None if key is None else step_start(conn, ds, key)
            if recorded is not None:
                return recorded
            # The run's events, and the writes the ledger holds back (``events.later``:
            # episodes, step rows, budgets; no record reads them back), in one statement
            # at the body's end on PostgreSQL, not one each.
            with events.batched(conn, writes=True):
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
