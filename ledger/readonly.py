"""A read-only PostgreSQL role for dashboards, granted one database's operator views and
nothing else.

``gatehouse readonly-role`` (mise task ``db:readonly-role``) creates the role
``gatehouse_readonly_<database>`` (LOGIN; with a password when
``GATEHOUSE_READONLY_PASSWORD`` is set), grants it ``CONNECT`` on that database,
``USAGE`` on its schema ``gatehouse`` and ``SELECT`` on every view. A role is
cluster-wide in PostgreSQL, so each Gatehouse database on a server has its own: a
login made for one deployment reads nothing of another's. A view reads its tables
with its owner's rights, so the role needs no right on any table, Gatehouse's or
DBOS's. Migrations re-create the views, and with them these grants
(``ledger._migrate``).

Releases before this one made a single ``gatehouse_readonly`` for every database it
was run on; where that role holds ``CONNECT`` on this database, migrations keep
granting it the views, so an upgrade does not cut off a dashboard that used it.
"""

from __future__ import annotations

import hashlib
import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger._db import APP_SCHEMA, Database, sql
from ledger._statement import execute

__all__ = ["LEGACY_ROLE", "create_readonly_role", "grant_views", "readonly_role"]

LEGACY_ROLE = "gatehouse_readonly"
_MAX_NAME = 63  # PostgreSQL's identifier length


def readonly_role(database: str) -> str:
    """The read-only role of ``database``: ``gatehouse_readonly_`` and the database's
    name in lower case, any other character than a letter, a digit or ``_`` made
    ``_``; a name too long for PostgreSQL ends in a digest of the whole."""
    name = f"{LEGACY_ROLE}_{re.sub(r'[^a-z0-9_]', '_', database.lower())}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(database.encode()).hexdigest()[:10]
    return f"{name[: _MAX_NAME - 11]}_{digest}"


def _exists(conn: Connection, role: str) -> bool:
    found = execute(conn, sql("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role})
    return found.first() is not None


def _legacy_connects_here(conn: Connection) -> bool:
    """The single role of older releases holds CONNECT on this database (granted by
    their ``readonly-role`` here, not merely by PUBLIC's default)."""
    found = execute(
        conn,
        sql(
            "SELECT 1 FROM pg_database d, aclexplode(d.datacl) a"
            " JOIN pg_roles r ON r.oid = a.grantee"
            " WHERE d.datname = current_database() AND r.rolname = :r"
            " AND a.privilege_type = 'CONNECT'"
        ),
        {"r": LEGACY_ROLE},
    )
    return found.first() is not None


def _database(conn: Connection) -> str:
    return str(conn.exec_driver_sql("SELECT current_database()").scalar())


def grant_views(conn: Connection, views: list[str]) -> None:
    """Grant this database's role (when it exists) the schema and ``views``, and the
    older releases' single role where it was granted this database; PostgreSQL only."""
    roles = [r for r in (readonly_role(_database(conn)),) if _exists(conn, r)]
    if _legacy_connects_here(conn):
        roles.append(LEGACY_ROLE)
    for role in roles:
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA {APP_SCHEMA} TO "{role}"')
        for view in views:
            conn.exec_driver_sql(f'GRANT SELECT ON {APP_SCHEMA}.{view} TO "{role}"')


def create_readonly_role(db: Database, views: list[str], password: str | None) -> tuple[str, bool]:
    """Create this database's role if it is missing and grant it the views; the role's
    name, and True when it was created now."""
    with db.engine.begin() as conn:
        database = _database(conn)
        role = readonly_role(database)
        created = False
        if not _exists(conn, role):
            try:
                with conn.begin_nested():
                    conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
                created = True
            except sa.exc.ProgrammingError:  # a concurrent set-up made it meanwhile
                pass
        if password is not None:
            quoted = conn.exec_driver_sql("SELECT quote_literal(%s)", (password,)).scalar()
            conn.exec_driver_sql(f'ALTER ROLE "{role}" PASSWORD {quoted}')
        conn.exec_driver_sql(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
        grant_views(conn, views)
    return role, created
