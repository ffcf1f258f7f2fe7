"""One of the ledger's statements, run on the connection its caller's transaction holds.

``execute(conn, clause, params)`` is ``conn.execute(clause, params)`` for what the
ledger asks of it (its rows, how many it changed) without SQLAlchemy's
per-statement machinery on PostgreSQL: the statement's text is compiled for the
connection's dialect once, then handed to psycopg's cursor on the same DBAPI
connection, inside the same transaction (SQLAlchemy still begins, commits and
rolls it back, and keeps the pool). That machinery (the compiled cache's key, the
execution context, the result's metadata) cost 84 µs of CPU a statement against
psycopg's 23 on this machine, and a run makes about 80 of them.

What stays as it was:

* an error is SQLAlchemy's, made by SQLAlchemy's own handler from psycopg's
  (``DBAPIError`` and its kinds, a dropped connection invalidated in its pool), so
  every caller's retry and refusal reads it as before;
* the engine's cursor events fire around the statement, so whatever listens to
  them (a statement counter, tracing) sees it;
* a statement whose parameters SQLAlchemy must process (an expanding ``IN``, a
  typed bind) and every statement on SQLite (``sqlite3`` is C code called from
  SQLAlchemy's frames; what is spent around it is the same either way) go through
  ``conn.execute``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.types import NullType

from ledger._db import is_postgres

__all__ = ["execute", "returned_a_row", "rows_changed"]

# a row: psycopg's tuple, or SQLAlchemy's Row (which reads as one) on SQLite
_Row = Sequence[Any]

# A clause's text for psycopg (None: it goes through conn.execute), by the clause's
# id; the clause is kept beside it so that its id is never another's. The texts are
# few (``ledger._db.sql`` makes one clause per text); past the bound all are dropped.
_TEXTS: dict[int, tuple[TextClause, str | None]] = {}
_TEXTS_BOUND = 4096
_TEXTS_LOCK = threading.Lock()


class _Rows:
    """A statement's answer: its rows (tuples) and how many rows it changed. Its
    cells are the database's values, as untyped as SQLAlchemy's rows were: each
    caller reads its columns as the statement it wrote names them."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: Sequence[_Row], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    @classmethod
    def of(cls, result: sa.CursorResult[Any]) -> _Rows:
        rows = result.all() if result.returns_rows else []
        return cls(rows, result.rowcount)

    def __iter__(self) -> Iterator[_Row]:
        return iter(self._rows)

    def all(self) -> list[_Row]:
        return list(self._rows)

    def first(self) -> _Row | None:
        return self._rows[0] if self._rows else None

    def one(self) -> _Row:
        if len(self._rows) != 1:
            raise sa.exc.NoResultFound(f"expected one row, got {len(self._rows)}")
        return self._rows[0]

    def scalar(self) -> Any:
        """The first row's first column (None when there is no row)."""
        return self._rows[0][0] if self._rows else None


def rows_changed(result: object) -> int:
    """How many rows a write touched (``execute``'s answer, or SQLAlchemy's)."""
    return max(result.rowcount, 0) if isinstance(result, _Rows | sa.CursorResult) else 0


def returned_a_row(result: object) -> bool:
    """Whether a statement (``RETURNING``) answered with a row (``execute``'s answer, or
    SQLAlchemy's)."""
    return isinstance(result, _Rows | sa.CursorResult) and result.first() is not None


def _text_for(conn: Connection, clause: TextClause) -> str | None:
    key = id(clause)
    known = _TEXTS.get(key)
    if known is not None and known[0] is clause:
        return known[1]
    compiled = clause.compile(dialect=conn.dialect)
    plain = all(not b.expanding and isinstance(b.type, NullType) for b in compiled.binds.values())
    text = compiled.string if plain else None
    with _TEXTS_LOCK:
        if len(_TEXTS) >= _TEXTS_BOUND:
            _TEXTS.clear()
        _TEXTS[key] = (clause, text)
    return text


def execute(
    conn: Connection, clause: TextClause, params: Mapping[str, object] | None = None
) -> _Rows:
    """The statement's rows, run in ``conn``'s transaction (begun here if none is)."""
    values = params if params is not None else {}
    if not is_postgres(conn):
        return _Rows.of(conn.execute(clause, values))
    text = _text_for(conn, clause)
    if text is None:
        return _Rows.of(conn.execute(clause, values))
    if not conn.in_transaction():
        conn.begin()  # as conn.execute would: the caller commits or rolls it back
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]  # psycopg's
    events = conn._has_events or conn.engine._has_events
    try:
        if events:
            conn.dispatch.before_cursor_execute(conn, cursor, text, values, None, False)
        cursor.execute(text, values)
        if events:
            conn.dispatch.after_cursor_execute(conn, cursor, text, values, None, False)
        rows = cursor.fetchall() if cursor.description is not None else []
        return _Rows(rows, cursor.rowcount)
    except BaseException as exc:
        # SQLAlchemy's own handler: wraps the error, invalidates a dropped connection
        conn._handle_dbapi_exception(exc, text, values, cursor, None)
        raise  # it raises; this line is for the type checker
    finally:
        cursor.close()
