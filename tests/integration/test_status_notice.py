"""A run's status change tells the shim's waiting clients (PostgreSQL NOTIFY on
``runs.STATUS_CHANNEL``, delivered at commit), from the same statement as the update:
once per change, also when the run had ended already (the waiters look again and
find it so), and never for a change rolled back."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from contracts import RunStatus
from ledger import Database, events, runs
from tests.support.rows import new_run


class _RolledBack(Exception):
    pass


def test_a_status_change_notifies_at_commit(db: Database, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("SQLite's waiting clients look at the run's row; there is no NOTIFY")
    new_run(db, "run_n")
    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as listening:
        listening.execute(f"LISTEN {runs.STATUS_CHANNEL}")

        def heard() -> list[str]:
            return [n.payload for n in listening.notifies(timeout=0.5)]

        with pytest.raises(_RolledBack), db.engine.begin() as conn:
            runs.set_status(conn, "run_n", RunStatus.RUNNING, "steps")
            raise _RolledBack
        assert heard() == []
        with db.engine.begin() as conn:
            runs.set_status(conn, "run_n", RunStatus.RUNNING, "steps")
        assert heard() == ["run_n"]
        with db.engine.begin() as conn:
            runs.set_status(conn, "run_n", RunStatus.SUCCEEDED, "done")
            runs.set_status(conn, "run_n", RunStatus.FAILED, "done")  # ended: not changed
        assert heard() == ["run_n"]  # one notice a transaction and channel
        with db.engine.connect() as conn:
            status = conn.execute(sa.text("SELECT status FROM runs WHERE run_id = 'run_n'"))
            assert status.scalar_one() == "succeeded"


def test_only_a_real_change_is_a_phase_event(db: Database) -> None:
    new_run(db, "run_p")
    for status, phase in [
        (RunStatus.RUNNING, "compile"),
        (RunStatus.RUNNING, "compile"),  # a records step run again: nothing new
        (RunStatus.RUNNING, "steps"),
        (RunStatus.SUCCEEDED, "done"),
        (RunStatus.FAILED, "done"),  # ended: the run is not changed
    ]:
        with db.engine.begin() as conn:
            runs.set_status(conn, "run_p", status, phase)
    with db.engine.connect() as conn:
        said = [(e.body["status"], e.body["phase"]) for e in events.after(conn, "run_p", 0)
                if e.kind == "run.phase"]  # fmt: skip
    assert said == [("running", "compile"), ("running", "steps"), ("succeeded", "done")]
