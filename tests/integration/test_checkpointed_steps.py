"""A workflow's record (``worker.durable._tx.tx``) commits its body once, whatever runs it again.

The record's checkpoint is read and written in the body's own transaction
(``worker.durable._tx._checkpointed``). Run again with the same key (a recovered
workflow runs its code again), it answers the first execution's output and writes
nothing; two executions at once cannot both commit (PostgreSQL: the second one's
checkpoint meets the first's and its body rolls back). The key is given here as
``tx`` takes it in a workflow (``record_key``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from dbos._serialization import deserialize_value, serialize_value

from contracts import JsonObject
from ledger import Conn, checkpoints
from tests.support.stack import Stack
from worker.durable import _tx
from worker.durable._dbos import StepKey, checkpoint_step, step_checkpoint
from worker.durable._state import datasource
from worker.runtime import WorkerSettings, runtime


@pytest.fixture
def probe(stack: Stack) -> str:
    """A table of its own the bodies write to, one row per body that committed."""
    table = f"probe_{uuid.uuid4().hex[:8]}"
    stack.execute(f"CREATE TABLE {table} (n TEXT NOT NULL)")
    return table


def _rows(stack: Stack, table: str) -> list[str]:
    return [str(r[0]) for r in stack.sql(f"SELECT n FROM {table} ORDER BY n")]


def _writing(table: str, then: Callable[[], None] = lambda: None) -> _tx.Body:
    def body(conn: Conn, arg: JsonObject, _me: WorkerSettings) -> JsonObject:
        conn.execute(sa.text(f"INSERT INTO {table} (n) VALUES (:n)"), {"n": arg["n"]})
        then()
        return {"wrote": arg["n"]}

    return body


def test_a_record_run_again_answers_its_checkpoint_and_writes_nothing(
    stack: Stack, probe: str
) -> None:
    key: StepKey = (f"wf_{uuid.uuid4().hex}", -3)
    ran: list[str] = []
    first = _tx._checkpointed(_writing(probe, lambda: ran.append("first")), {"n": "first"}, key)
    again = _tx._checkpointed(_writing(probe, lambda: ran.append("again")), {"n": "again"}, key)
    assert first == again == {"wrote": "first"}
    assert ran == ["first"]  # answered from the checkpoint: the body not run at all
    assert _rows(stack, probe) == ["first"]


def test_another_record_of_the_workflow_runs_its_own_body(stack: Stack, probe: str) -> None:
    workflow = f"wf_{uuid.uuid4().hex}"
    _tx._checkpointed(_writing(probe), {"n": "one"}, (workflow, -1))
    assert _tx._checkpointed(_writing(probe), {"n": "two"}, (workflow, -2)) == {"wrote": "two"}
    assert _rows(stack, probe) == ["one", "two"]


def test_outside_a_workflow_the_body_runs_each_time(stack: Stack, probe: str) -> None:
    assert _tx.record_key() is None  # no workflow runs here
    _tx._checkpointed(_writing(probe), {"n": "a"}, None)
    _tx._checkpointed(_writing(probe), {"n": "b"}, None)
    assert _rows(stack, probe) == ["a", "b"]


def test_of_two_executions_at_once_the_one_that_commits_first_wins(
    stack: Stack, backend: str, probe: str
) -> None:
    if backend == "sqlite":
        pytest.skip("SQLite takes one writer at a time: a second execution cannot overlap")
    key: StepKey = (f"wf_{uuid.uuid4().hex}", -5)

    def other_commits_first() -> None:
        # while this execution's body is still open: another execution of the same
        # record commits its rows and its checkpoint
        with runtime().db.engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {probe} (n) VALUES ('other')"))
            assert checkpoint_step(conn, datasource(), key, {"wrote": "other"})

    out = _tx._checkpointed(_writing(probe, other_commits_first), {"n": "mine"}, key)
    assert out == {"wrote": "other"}
    assert _rows(stack, probe) == ["other"]  # this execution's row rolled back


def _checkpoints(stack: Stack, prefix: str) -> int:
    table = "datasource_outputs" if stack.backend == "sqlite" else "dbos.datasource_outputs"
    found = stack.sql(f"SELECT COUNT(*) FROM {table} WHERE workflow_id LIKE :p", p=f"{prefix}%")
    return int(found[0][0])


def test_the_checkpoints_of_succeeded_workflows_are_dropped_and_no_others(stack: Stack) -> None:
    run_id = stack.finished_run(objective="checkpoints dropped")
    ended = [str(r[0]) for r in stack.sql(
        f"SELECT workflow_uuid FROM {stack.workflow_table} WHERE workflow_uuid LIKE :p"
        " AND status = 'SUCCESS'", p=f"{run_id}%",
    )]  # fmt: skip
    assert len(ended) == 2  # the stretch up to the card, and the one after the decision
    unfinished = f"wf_{uuid.uuid4().hex}"  # a workflow that has not ended: no SUCCESS row
    with runtime().db.engine.begin() as conn:
        assert checkpoint_step(conn, datasource(), (unfinished, 1), {"kept": True})
        checkpoints.drop_finished(conn)  # as the reaper's leader does every tick
    assert _checkpoints(stack, run_id) == 0
    assert _checkpoints(stack, unfinished) == 1


def test_a_checkpoint_reads_as_dbos_writes_it_and_back(stack: Stack) -> None:
    """The previous release wrote these rows through DBOS's datasource, and a worker of
    it may still read ours (a rolling upgrade): one table, one format."""
    ds = datasource()
    theirs: StepKey = (f"wf_{uuid.uuid4().hex}", 2)
    ours: StepKey = (f"wf_{uuid.uuid4().hex}", 4)
    with runtime().db.engine.begin() as conn:
        serialized, serialization = serialize_value({"parked": True}, None, ds.serializer)
        ds._record_result(conn, theirs[0], theirs[1], serialized, None, serialization)
        assert checkpoint_step(conn, ds, ours, {"wrote": "ours"})
        assert step_checkpoint(conn, ds, theirs) == {"parked": True}
    recorded = ds._check_execution(*ours)
    assert recorded is not None
    assert deserialize_value(recorded["output"], recorded["serialization"], ds.serializer) == {
        "wrote": "ours"
    }
