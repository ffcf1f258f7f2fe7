"""A read-only PostgreSQL role for dashboards, granted the operator views and nothing else.

``gatehouse readonly-role`` (mise task ``db:readonly-role``) creates the role
``gatehouse_readonly`` (LOGIN; with a password when ``GATEHOUSE_READONLY_PASSWORD``
is set) and grants it ``USAGE`` on schema ``gatehouse`` and ``SELECT`` on every view.
A view reads its tables with its owner's rights, so the role needs no right on
any table, Gatehouse's or DBOS's. Migrations re-create the views, and with
them these grants (``ledger._migrate``).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger._db import APP_SCHEMA, Database

__all__ = ["READONLY_ROLE", "create_readonly_role", "grant_views"]

READONLY_ROLE = "gatehouse_readonly"


def _exists(conn: Connection) -> bool:
    found = conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": READONLY_ROLE})
    return found.first() is not None


def grant_views(conn: Connection, views: list[str]) -> None:
    """Grant the role (when it exists) the schema and ``views``; PostgreSQL only."""
    if not _exists(conn):
        return
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {APP_SCHEMA} TO {READONLY_ROLE}")
    for view in views:
        conn.exec_driver_sql(f"GRANT SELECT ON {APP_SCHEMA}.{view} TO {READONLY_ROLE}")


def create_readonly_role(db: Database, views: list[str], password: str | None) -> bool:
    """Create the role if it is missing (True when created now) and grant it the views."""
    with db.engine.begin() as conn:
        created = False
        if not _exists(conn):
            try:
                with conn.begin_nested():
                    conn.exec_driver_sql(f"CREATE ROLE {READONLY_ROLE} LOGIN")
                created = True
            except sa.exc.ProgrammingError:  # another database's set-up made it meanwhile
                pass
        if password is not None:
            quoted = conn.exec_driver_sql("SELECT quote_literal(%s)", (password,)).scalar()
            conn.exec_driver_sql(f"ALTER ROLE {READONLY_ROLE} PASSWORD {quoted}")
        database = conn.exec_driver_sql("SELECT current_database()").scalar()
        conn.exec_driver_sql(f'GRANT CONNECT ON DATABASE "{database}" TO {READONLY_ROLE}')
        grant_views(conn, views)
    return created
