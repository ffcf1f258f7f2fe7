"""A stretch's workflow id is made in two places: ``stretches.workflow_id`` in Python
and ``LATEST_WORKFLOW_SQL`` in the statement that locks a run (which reads DBOS's
status of that workflow). They must name the same workflow for every stretch."""

from __future__ import annotations

import sqlite3

import pytest

from ledger import stretches


@pytest.mark.parametrize("stretch", [None, 0, 1, 2, 17])
def test_the_sql_names_the_workflow_python_names(stretch: int | None) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, stretch INTEGER)")
    conn.execute("INSERT INTO runs VALUES ('run_abc', ?)", (stretch,))
    (made,) = conn.execute(f"SELECT {stretches.LATEST_WORKFLOW_SQL} FROM runs").fetchone()
    assert made == stretches.workflow_id("run_abc", stretch)
