"""``gatehouse readonly-role``: a PostgreSQL login that reads the views and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from ledger import migrate, open_database
from ledger.readonly import READONLY_ROLE
from tests.support.stack import drop_database, fresh_database_url

GATEHOUSE = Path(sys.executable).with_name("gatehouse")


@pytest.fixture
def pg_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend != "postgres":
        pytest.skip("a database role is PostgreSQL's; SQLite files have no roles")
    url = fresh_database_url(backend, tmp_path)
    yield url
    drop_database(url)


def _as_readonly(url: str) -> sa.Engine:
    parsed = sa.make_url(url.replace("postgresql://", "postgresql+psycopg://", 1))
    return sa.create_engine(parsed.set(username=READONLY_ROLE, password=None))


def _role(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GATEHOUSE), "readonly-role", "--database-url", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "GATEHOUSE_READONLY_PASSWORD": ""},
    )


def test_the_role_reads_every_view_and_no_table(pg_url: str) -> None:
    made = _role(pg_url)
    assert made.returncode == 0, made.stderr
    assert READONLY_ROLE in made.stdout and "v_run_phases" in made.stdout
    engine = _as_readonly(pg_url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SET search_path = gatehouse")
            for view in ("v_run_overview", "v_run_phases", "v_workers", "v_calls", "v_budgets"):
                conn.exec_driver_sql(f"SELECT * FROM {view}").all()
        for forbidden in (
            "SELECT * FROM gatehouse.runs",
            "SELECT * FROM gatehouse.calls",
            "SELECT * FROM dbos.workflow_status",
            "INSERT INTO gatehouse.executors (executor_id) VALUES ('x')",
        ):
            with engine.connect() as conn, pytest.raises(sa.exc.ProgrammingError) as denied:
                conn.exec_driver_sql(forbidden)
            assert "permission denied" in str(denied.value)
        # migrations drop and re-create the views: the grants come back with them
        db = open_database(pg_url)
        try:
            migrate(db)
        finally:
            db.dispose()
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT * FROM gatehouse.v_run_phases").all()
    finally:
        engine.dispose()
    again = _role(pg_url)  # a second run changes nothing and says so
    assert again.returncode == 0 and "already there" in again.stdout, again.stderr


def test_sqlite_is_told_why_not(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(GATEHOUSE), "readonly-role", "--database-url", f"sqlite:///{tmp_path}/x.sqlite"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "PostgreSQL" in out.stderr
