"""The profile harness's reading of py-spy's collapsed stacks (``bench.hitl.profile``)."""

from __future__ import annotations

import pytest

from bench.hitl.profile import read_collapsed

RAW = "\n".join(
    [
        # a tool call's commit: Gatehouse → SQLAlchemy → psycopg
        "_bootstrap (threading.py:1002);_step (worker/durable/_calls.py:80);"
        "execute (sqlalchemy/engine/base.py:1416);wait (psycopg/connection.py:495) 6",
        # the same Gatehouse function, its own line
        "_bootstrap (threading.py:1002);_step (worker/durable/_calls.py:81) 2",
        # DBOS's queue thread, no Gatehouse frame
        "_bootstrap (threading.py:1002);queue_worker_thread (dbos/_queue.py:733);"
        "execute (sqlalchemy/engine/base.py:1416) 2",
        "not a stack line",
    ]
)


def test_samples_are_charged_by_package_function_and_gatehouse_caller() -> None:
    p = read_collapsed(RAW)
    assert p.samples == 10
    assert p.own == {"psycopg": 6, "gatehouse worker": 2, "sqlalchemy": 2}
    # inclusive: once per sample however many lines of a function are on the stack
    assert p.inclusive["_step (worker/durable/_calls.py)"] == 8
    assert p.inclusive["execute (sqlalchemy/engine/base.py)"] == 8
    assert p.inclusive["_bootstrap (threading.py)"] == 10
    assert p.caller == {"_step (worker/durable/_calls.py)": 8, "(no Gatehouse frame)": 2}
    assert p.share(p.own, "psycopg") == pytest.approx(60.0)
