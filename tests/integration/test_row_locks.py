"""A run's row lock is taken once per transaction, and still serializes its appends.

Counted at the engine: the statements that only lock a run's row (``FOR UPDATE``)
across the writes a tool call's completion makes (the chain link and three
events), against one per transaction; and two transactions appending to one
run's stream still wait for each other, the second numbering after the first.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from contracts import ErrorCode, GatehouseError, JsonObject, RunStatus
from ledger import Database, calls, cancels, chain, chain_verify, events, evidence, runs, stretches
from shim.api.services.cancel import refuse_if_cancelled
from tests.support.rows import new_run, statements_seen
from worker import records
from worker.runtime import WorkerSettings


def test_appends_in_one_transaction_lock_the_run_once(db: Database, backend: str) -> None:
    new_run(db, "run_a")
    new_run(db, "run_b")
    locks = statements_seen(db, "SELECT 1 FROM runs", "FOR UPDATE")
    pg = backend == "postgres"  # SQLite: one writer at a time, nothing is locked
    with db.engine.begin() as conn:
        for n in range(3):
            events.emit(conn, "run_a", "message", {"n": n})
        events.emit(conn, "run_b", "message", {"n": 0})  # another run: its own lock
    assert len(locks) == (2 if pg else 0)
    with db.engine.begin() as conn:  # a new transaction holds nothing yet
        events.emit(conn, "run_a", "message", {"n": 3})
    assert len(locks) == (3 if pg else 0)
    with db.engine.begin() as conn:  # a status change's UPDATE already holds the row
        runs.set_status(conn, "run_a", RunStatus.RUNNING, "planning")
        events.emit(conn, "run_a", "message", {"n": 4})
    assert len(locks) == (3 if pg else 0)
    with db.engine.begin() as conn:  # taken in a savepoint: not relied on after it
        with conn.begin_nested():
            events.emit(conn, "run_a", "message", {"n": 5})
        events.emit(conn, "run_a", "message", {"n": 6})
    assert len(locks) == (5 if pg else 0)
    with db.engine.connect() as conn:
        seqs = [e.seq for e in events.after(conn, "run_a", 0)]
    assert seqs == list(range(1, 10))  # run.accepted, 7 messages, the phase


def test_a_second_writer_waits_for_the_first_to_commit(db: Database, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("SQLite has one writer at a time: there is no second writer to wait")
    new_run(db, "run_c")
    first_in = threading.Event()
    order: list[str] = []

    def second() -> None:
        first_in.wait(10)
        with db.engine.begin() as conn:
            events.emit(conn, "run_c", "message", {"who": "second"})
            order.append("second")

    waiter = threading.Thread(target=second)
    waiter.start()
    with db.engine.begin() as conn:
        events.emit(conn, "run_c", "message", {"who": "first"})
        events.emit(conn, "run_c", "message", {"who": "first again"})
        first_in.set()
        time.sleep(0.3)  # the second writer is blocked on the run's row meanwhile
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    with db.engine.connect() as conn:
        got = [(e.seq, e.body["who"]) for e in events.after(conn, "run_c", 1)]
    assert got == [(2, "first"), (3, "first again"), (4, "second")]
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM run_events")).scalar_one() == 4


def test_a_run_s_seed_is_chosen_once_and_the_lock_it_took_is_remembered(
    db: Database, backend: str
) -> None:
    new_run(db, "run_s")
    seen = statements_seen(db, "SELECT 1 FROM runs", "FOR UPDATE")
    with db.engine.begin() as conn:
        assert runs.set_seed(conn, "run_s", "first") == "first"
        assert runs.set_seed(conn, "run_s", "second") == "first"  # asked again: kept
        held_to = ("sha256:profile", "sha256:pool", None)
        assert runs.set_seed(conn, "run_s", "third", held_to) == "first"
        events.emit(conn, "run_s", "message", {"n": 1})  # the seed's UPDATE holds the row
    assert seen == []
    with db.engine.connect() as conn:
        digests = conn.execute(
            sa.text(
                "SELECT profile_digest, tool_pool_digest, cedar_digest FROM runs"
                " WHERE run_id = 'run_s'"
            )
        ).one()
    assert tuple(digests) == ("sha256:profile", "sha256:pool", None)
    with db.engine.begin() as conn:
        assert runs.set_seed(conn, "no_such_run", "third") == "third"


def _claimed(db: Database, run_id: str, step_id: str) -> str:
    key = calls.op_key(run_id, step_id, 1)
    with db.engine.begin() as conn:
        assert calls.claim(conn, key=key, run_id=run_id, step_id=step_id, attempt=1,
                           kind="tool", target="noop", request={"step": step_id})  # fmt: skip
    return key


def _complete(conn: sa.Connection, key: str, run_id: str) -> calls.CallRow:
    return calls.complete(conn, key=key, run_id=run_id, response={"ok": True, "output": {}},
                          ok=True, error_code=None, duration_ms=1)  # fmt: skip


def test_a_completion_whose_chain_head_moved_while_it_waited_is_refused_then_links_after(
    db: Database, backend: str
) -> None:
    """A completion locks the run and reads its chain's head in one statement: one that
    waited for the lock read the head as it was before the other link committed, and
    the UNIQUE (run_id, chain_seq) refuses the stale link (``chain.head_moved``); tried
    again, it links after the other one. The chain never forks."""
    if backend != "postgres":
        pytest.skip("SQLite has one writer at a time: no completion waits for another")
    new_run(db, "run_h")
    first, second = _claimed(db, "run_h", "s1"), _claimed(db, "run_h", "s2")
    locked = threading.Event()
    refused: list[BaseException] = []

    def behind() -> None:
        locked.wait(10)
        try:
            with db.engine.begin() as conn:
                _complete(conn, second, "run_h")  # waits for the first to commit
        except sa.exc.IntegrityError as exc:
            refused.append(exc)

    waiter = threading.Thread(target=behind)
    waiter.start()
    with db.engine.begin() as conn:
        _complete(conn, first, "run_h")
        locked.set()
        time.sleep(0.3)  # the second completion is blocked on the run's row meanwhile
    waiter.join(10)
    assert len(refused) == 1 and chain.head_moved(refused[0]), refused
    with db.engine.begin() as conn:  # tried again: after the first link
        assert _complete(conn, second, "run_h").status == "completed"
    with db.engine.connect() as conn:
        links = conn.execute(
            sa.text("SELECT op_key, chain_seq FROM calls WHERE run_id = 'run_h' ORDER BY 2")
        ).all()
        report = chain_verify.verify(conn, "run_h")
    assert [tuple(r) for r in links] == [(first, 1), (second, 2)]
    assert report.ok and report.entries == 2, report


def _dbos_status_table(db: Database) -> str:
    """DBOS's workflow table, as the run's lock reads it (``stretches.lock``: DBOS's
    status of the latest stretch), made here with the two columns it reads: this
    database has Gatehouse's tables and no DBOS (no worker either, whose sweep would
    end the runs made below)."""
    table = "workflow_status" if db.is_sqlite else "dbos.workflow_status"
    with db.engine.begin() as conn:
        if not db.is_sqlite:
            conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS dbos"))
        conn.execute(sa.text(f"CREATE TABLE {table} (workflow_uuid TEXT PRIMARY KEY, status TEXT)"))
    return table


def test_an_approval_waiting_for_the_row_sees_the_cancel_committed_meanwhile(
    db: Database,
) -> None:
    """A cancel takes the run's row lock, then writes its row; an approval that waited
    for that lock must see the cancel once it has the lock. (On PostgreSQL a statement
    that waited for a row lock reads other tables as they were when it began: the
    cancel is read by a statement after the lock, not with it. On SQLite the approval's
    transaction cannot begin before the cancel's ends.)"""
    _dbos_status_table(db)
    new_run(db, "run_x")
    cancel_in = threading.Event()
    seen: dict[str, object] = {}

    def approve() -> None:
        cancel_in.wait(10)
        with db.engine.begin() as conn:
            try:
                seen["locked"] = refuse_if_cancelled(conn, "run_x")
            except GatehouseError as exc:
                seen["code"] = exc.code

    approver = threading.Thread(target=approve)
    approver.start()
    with db.engine.begin() as conn:
        assert cancels.lock_run(conn, "run_x") is not None
        cancels.request(conn, "run_x", requested_by="carol", reason=None, source="gatehouse")
        cancel_in.set()
        time.sleep(0.3)  # the approval waits for the run's row meanwhile
    approver.join(10)
    assert seen == {"code": ErrorCode.RUN_CANCELLED}


@pytest.mark.parametrize("trace", [None, "sha256:" + "0" * 64], ids=["no-trace", "trace"])
def test_a_run_finishing_while_a_cancel_holds_its_row_ends_cancelled(
    db: Database, tmp_path: Path, trace: str | None
) -> None:
    """A cancel answered "cancelling" (it found the run running under the run's row
    lock) is seen by the finish that would have made the run succeeded, though that
    finish began while the cancel had not committed: the finish reads the cancel after
    taking the run's row lock. Read before it, the cancel was missed and the run ended
    succeeded (seen in the cancel-approve race test). On SQLite the finish's
    transaction cannot begin before the cancel's ends."""
    new_run(db, "run_f")
    me = WorkerSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": db.url,
            "GATEHOUSE_WORKSPACE_ROOT": str(tmp_path / "ws"),
            "GATEHOUSE_ANCHOR_FILE": str(tmp_path / "anchors.jsonl"),
        }
    )
    cancel_in = threading.Event()
    ended: dict[str, object] = {}

    def finish() -> None:
        cancel_in.wait(10)
        arg: JsonObject = {
            "run_id": "run_f",
            "status": "succeeded",
            "steps": [],
            "trace_digest": trace,
        }
        with db.engine.begin() as conn:
            ended.update(records.finish(conn, arg, me))

    finisher = threading.Thread(target=finish)
    finisher.start()
    with db.engine.begin() as conn:
        locked = cancels.lock_run(conn, "run_f")
        assert locked is not None and not locked.status.terminal
        cancels.request(conn, "run_f", requested_by="carol", reason=None, source="gatehouse")
        cancel_in.set()
        time.sleep(0.3)  # the finish waits for the run's row meanwhile
    finisher.join(10)
    assert ended == {"status": "cancelled"}
    with db.engine.connect() as conn:
        assert runs.run_status(conn, "run_f") is RunStatus.CANCELLED
        digest = conn.execute(sa.text("SELECT trace_digest FROM runs WHERE run_id = 'run_f'"))
        assert digest.scalar_one() == trace
        [summary] = [
            e for e in evidence.list_episodes(conn, "run_f")
            if e.episode_type == "execution/run_summary"
        ]  # fmt: skip
    assert isinstance(summary.body, dict)
    details = summary.body["result_details"]
    assert isinstance(details, dict) and details["trace_digest"] == trace  # the episode says it too


@pytest.mark.parametrize("stretch", [None, 0, 2], ids=["unsplit", "first", "third"])
def test_an_approval_is_refused_while_dbos_holds_the_latest_stretch_cancelled(
    db: Database, stretch: int | None
) -> None:
    """A stretch cancelled through DBOS before the sweep has reached its run refuses a
    decision. The run's lock reads DBOS's status of the latest stretch's workflow, its
    id made in SQL (``stretches.LATEST_WORKFLOW_SQL``): here on each database, for a
    run begun before the split, its first stretch and a later one."""
    table = _dbos_status_table(db)
    new_run(db, "run_y")
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE runs SET stretch = :s WHERE run_id = 'run_y'"), {"s": stretch})
        conn.execute(
            sa.text(f"INSERT INTO {table} VALUES (:w, 'CANCELLED')"),
            {"w": stretches.workflow_id("run_y", stretch)},
        )
        # another stretch's workflow, not the latest: it decides nothing
        conn.execute(
            sa.text(f"INSERT INTO {table} VALUES ('run_y:1', 'SUCCESS')"),
        )
    with db.engine.begin() as conn, pytest.raises(GatehouseError) as refused:
        refuse_if_cancelled(conn, "run_y")
    assert refused.value.code is ErrorCode.RUN_CANCELLED
    assert refused.value.details == {"cancelled_by": "dbos", "source": "dbos"}
