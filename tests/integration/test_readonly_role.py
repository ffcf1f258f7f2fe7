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
from ledger.readonly import LEGACY_ROLE, readonly_role
from tests.support.stack import drop_database, fresh_database_url

GATEHOUSE = Path(sys.executable).with_name("gatehouse")


def _role_of(url: str) -> str:
    return readonly_role(str(sa.make_url(url).database))


def _drop_role(url: str, role: str) -> None:
    """Roles are the cluster's: the test's go once its databases are dropped."""
    admin = sa.create_engine(
        sa.make_url(url.replace("postgresql://", "postgresql+psycopg://", 1)).set(
            database="postgres"
        ),
        isolation_level="AUTOCOMMIT",
    )
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
    finally:
        admin.dispose()


@pytest.fixture
def pg_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend != "postgres":
        pytest.skip("a database role is PostgreSQL's; SQLite files have no roles")
    url = fresh_database_url(backend, tmp_path)
    yield url
    drop_database(url)
    _drop_role(url, _role_of(url))


def _as_readonly(url: str, role: str | None = None) -> sa.Engine:
    parsed = sa.make_url(url.replace("postgresql://", "postgresql+psycopg://", 1))
    return sa.create_engine(parsed.set(username=role or _role_of(url), password=None))


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
    assert _role_of(pg_url) in made.stdout and "v_run_phases" in made.stdout
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


def test_each_database_has_its_own_role(pg_url: str, tmp_path: Path) -> None:
    """A role is the whole server's: one database's login must read nothing of another
    Gatehouse database on the same server (it once was one login for all of them)."""
    other = fresh_database_url("postgres", tmp_path)
    try:
        for url in (pg_url, other):
            made = _role(url)
            assert made.returncode == 0, made.stderr
        assert _role_of(pg_url) != _role_of(other)
        mine = _as_readonly(pg_url)
        try:
            with mine.connect() as conn:
                conn.exec_driver_sql("SELECT * FROM gatehouse.v_run_overview").all()
        finally:
            mine.dispose()
        # this database's login, pointed at the other database: no view of it is readable
        crossed = _as_readonly(other, role=_role_of(pg_url))
        try:
            with crossed.connect() as conn, pytest.raises(sa.exc.ProgrammingError) as denied:
                conn.exec_driver_sql("SELECT * FROM gatehouse.v_run_overview").all()
            assert "permission denied" in str(denied.value)
        finally:
            crossed.dispose()
    finally:
        drop_database(other)
        _drop_role(other, _role_of(other))


def test_the_older_single_role_keeps_its_views_where_it_was_granted(pg_url: str) -> None:
    """An older release made one gatehouse_readonly and granted it this database: after
    the upgrade, migrations still grant it the views they re-create here."""
    db = open_database(pg_url)
    try:
        migrate(db)
        with db.engine.begin() as conn:
            if (
                conn.exec_driver_sql(
                    f"SELECT 1 FROM pg_roles WHERE rolname = '{LEGACY_ROLE}'"
                ).first()
                is None
            ):
                conn.exec_driver_sql(f"CREATE ROLE {LEGACY_ROLE} LOGIN")
            database = conn.exec_driver_sql("SELECT current_database()").scalar()
            conn.exec_driver_sql(f'GRANT CONNECT ON DATABASE "{database}" TO {LEGACY_ROLE}')
        migrate(db)  # re-creates the views, granting them again
    finally:
        db.dispose()
    legacy = _as_readonly(pg_url, role=LEGACY_ROLE)
    try:
        with legacy.connect() as conn:
            conn.exec_driver_sql("SELECT * FROM gatehouse.v_run_overview").all()
    finally:
        legacy.dispose()
