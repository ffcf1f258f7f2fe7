"""Numbered migrations, each applied and recorded in one transaction.

Files ``ledger/migrations/NNNN_name.sql`` run in order; ``schema_migrations``
records each. Concurrent first starts are safe: PostgreSQL takes an advisory
lock for the transaction, SQLite's IMMEDIATE transaction holds the write lock.
The operator views in ``ledger/views/`` are re-created in the same
transaction, so they always match the code that migrated. A view that joins
DBOS's tables (``{{DBOS}}``) is created once those exist: DBOS makes them
when a worker first launches, which then calls ``add_missing_views``.

View files are written once for both databases; ``_apply`` expands these:
``{{BLOB}}``, ``{{DBOS}}`` (DBOS's schema prefix), ``{{EPOCH(expr)}}`` (seconds
since 1970 of an ISO 8601 text), ``{{NOW_EPOCH}}``, ``{{JSON(expr, a, b)}}``
(the text at ``a.b`` in a JSON text, NULL when absent) and
``{{JSON_OBJECT('k1', v1, 'k2', v2)}}`` (a JSON object's text, from name and value
pairs; NULL values kept as ``null``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger._db import APP_SCHEMA, Database, ensure_postgres_database, epoch_sql, now_iso
from ledger._net import long_statements
from ledger.readonly import grant_views

__all__ = ["add_missing_views", "migrate", "migration_files", "pending_migrations", "view_files"]

_ADVISORY_LOCK = 0x6761746568  # "gateh"


def migration_files() -> list[tuple[int, str, str]]:
    out = []
    for entry in resources.files("ledger.migrations").iterdir():
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    return sorted(out)


def view_files() -> list[tuple[str, str]]:
    out = []
    for entry in resources.files("ledger.views").iterdir():
        if entry.name.endswith(".sql"):
            out.append((entry.name.removesuffix(".sql"), entry.read_text("utf-8")))
    return sorted(out)


def _statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def _json(sqlite: bool) -> Callable[[re.Match[str]], str]:
    def expand(m: re.Match[str]) -> str:
        expr, *path = (part.strip() for part in m.group(1).split(","))
        if sqlite:
            return f"json_extract({expr}, '$.{'.'.join(path)}')"
        return f"(CAST({expr} AS jsonb) #>> '{{{','.join(path)}}}')"

    return expand


def _expanded(sql: str, sqlite: bool) -> str:
    sql = sql.replace("{{BLOB}}", "BLOB" if sqlite else "BYTEA")
    sql = sql.replace("{{DBOS}}", "" if sqlite else "dbos.")
    sql = sql.replace("{{NOW_EPOCH}}", epoch_sql("'now'", sqlite))
    sql = re.sub(r"\{\{EPOCH\(([^(){}]+)\)\}\}", lambda m: epoch_sql(m.group(1), sqlite), sql)
    sql = re.sub(
        r"\{\{JSON_OBJECT\(([^(){}]+)\)\}\}",
        lambda m: (
            f"json_object({m.group(1)})"
            if sqlite
            else f"CAST(json_build_object({m.group(1)}) AS TEXT)"
        ),
        sql,
    )
    return re.sub(r"\{\{JSON\(([^(){}]+)\)\}\}", _json(sqlite), sql)


def _apply(conn: Connection, sql: str, sqlite: bool) -> None:
    for stmt in _statements(_expanded(sql, sqlite)):
        conn.exec_driver_sql(stmt)


def _has_dbos_tables(conn: Connection, sqlite: bool) -> bool:
    if sqlite:
        found = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'workflow_status'"
        ).first()
    else:
        found = conn.exec_driver_sql("SELECT to_regclass('dbos.workflow_status')").scalar()
    return bool(found)


def _existing_views(conn: Connection, sqlite: bool) -> set[str]:
    if sqlite:
        rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'view'")
    else:
        rows = conn.execute(
            sa.text("SELECT viewname FROM pg_views WHERE schemaname = :s"), {"s": APP_SCHEMA}
        )
    return {str(r[0]) for r in rows}


def _create_views(conn: Connection, sqlite: bool, *, only_missing: bool) -> list[str]:
    """Create the views (those over DBOS's tables once they exist): every one again, or
    (``only_missing``) those not there yet; the names of the views there now. On
    PostgreSQL the read-only role, if made, gets SELECT on them (again)."""
    dbos = _has_dbos_tables(conn, sqlite)
    there = _existing_views(conn, sqlite) if only_missing else set()
    made = []
    for name, sql in view_files():
        if name in there:
            made.append(name)
            continue
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {name}")
        if dbos or "{{DBOS}}" not in sql:
            _apply(conn, sql, sqlite)
            made.append(name)
    if not sqlite:
        grant_views(conn, made)
    return made


def add_missing_views(db: Database) -> list[str]:
    """Create the views ``migrate`` could not yet: those over DBOS's tables, once DBOS
    made them (a worker after it launched, ``gatehouse migrate`` after DBOS's own
    migration). Every view is there after it; their names. Nothing missing: one read."""
    with db.engine.connect() as conn:
        if set(dict(view_files())) <= _existing_views(conn, db.is_sqlite):
            return sorted(dict(view_files()))
    with db.engine.begin() as conn:
        if not db.is_sqlite:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK})
        return _create_views(conn, db.is_sqlite, only_missing=True)


def migrate(db: Database) -> list[int]:
    """Bring the schema up to date; return the versions applied now."""
    if not db.is_sqlite:
        ensure_postgres_database(db.url)
    applied: list[int] = []
    # A migration may take long on a big database (or wait long for the lock):
    # the connection bounds of ledger._net are lifted for it.
    with db.engine.begin() as conn, long_statements(conn):
        if not db.is_sqlite:  # (SQLite: BEGIN IMMEDIATE already holds the write lock)
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK})
            conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {APP_SCHEMA}")
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        done = {row[0] for row in conn.exec_driver_sql("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            _apply(conn, sql, db.is_sqlite)
            conn.execute(
                sa.text(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :t)"
                ),
                {"v": version, "n": name, "t": now_iso()},
            )
            applied.append(version)
        _create_views(conn, db.is_sqlite, only_missing=False)
    return applied


def pending_migrations(conn: Connection) -> list[int]:
    """The migration versions this code has that the database has not applied."""
    try:
        done = {row[0] for row in conn.exec_driver_sql("SELECT version FROM schema_migrations")}
    except sa.exc.ProgrammingError:  # PostgreSQL: no such table yet
        done = set()
    except sa.exc.OperationalError as exc:  # SQLite says "no such table" this way
        if "no such table" not in str(exc):
            raise
        done = set()
    return [version for version, _, _ in migration_files() if version not in done]
