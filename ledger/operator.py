"""Read-only SQL for operators (``gatehouse sql``): views and tables, never writes."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from contracts import ErrorCode, GatehouseError
from ledger._db import Database, sql, sqlalchemy_url

__all__ = ["read_only_query"]


def _read_only_engine(db: Database) -> sa.Engine:
    if db.is_sqlite:
        # A read-only open of the file: a write fails in SQLite itself.
        path = sqlalchemy_url(db.url).removeprefix("sqlite:///")
        return sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    return db.engine


def read_only_query(
    db: Database, query: str, limit: int = 200
) -> tuple[list[str], list[list[str]]]:
    """Run one query in a read-only transaction; return column names and text cells."""
    engine = _read_only_engine(db)
    try:
        with engine.connect() as conn:
            if not db.is_sqlite:
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            result = conn.execute(sql(query))
            if not result.returns_rows:
                return [], []
            columns = list(result.keys())
            rows = [["" if v is None else str(v) for v in row] for row in result.fetchmany(limit)]
            conn.rollback()
    except DBAPIError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, f"the query failed: {str(exc.orig).strip()[:300]}"
        ) from exc
    finally:
        if engine is not db.engine:
            engine.dispose()
    return columns, rows
