"""Connections to the one database Gatehouse keeps everything in.

One URL names it. On PostgreSQL the app tables live in schema ``gatehouse``
and DBOS's in ``dbos``, in the same database, so a run's rows and its queue
entry can commit in one transaction. On SQLite both live in one file (WAL).
"""

from __future__ import annotations

import errno
import functools
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeAlias

import psycopg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.sql.elements import TextClause

from contracts import ErrorCode, GatehouseError
from ledger._config_file import DEFAULT_DATABASE_URL
from ledger._inhost import send_pending, wake_folder
from ledger._net import PgTimeouts, connect_args, still_open, timed_connect

__all__ = [
    "APP_SCHEMA",
    "DEFAULT_DATABASE_URL",
    "SQLITE_POOL_SIZE",
    "Conn",
    "Database",
    "corrupt",
    "database_unreachable",
    "dbos_workflows",
    "epoch_sql",
    "instant",
    "is_postgres",
    "iso",
    "no_space",
    "now_iso",
    "now_sql",
    "open_database",
    "sql",
    "storage_full",
    "system_engine",
]

APP_SCHEMA = "gatehouse"

# SQLite's memory in a process, all connections together (bytes): a soft bound, past
# which each connection's page cache recycles its pages. Without it every pooled
# connection keeps up to 2 MiB of pages, filled as the database file grows.
SQLITE_HEAP_LIMIT = 8 * 1024 * 1024
# The connections a process keeps to a SQLite file (PostgreSQL's default, fixed).
SQLITE_POOL_SIZE = PgTimeouts.pool_size

# What ledger functions run on: a connection, in the transaction its caller began.
Conn: TypeAlias = Connection


@functools.lru_cache(maxsize=4096)
def sql(text: str) -> TextClause:
    """``sa.text(text)``, made once per text. Making one parses the text for its bind
    parameters, about 40 µs: on every call of a hot path (a tool call runs a dozen of
    the ledger's statements) that was CPU spent for nothing. A statement's text is
    fixed (values are bound, never written in), so the texts are few."""
    return sa.text(text)


def now_iso() -> str:
    return iso(datetime.now(UTC))


@dataclass(frozen=True)
class Database:
    url: str  # as the operator gave it; DBOS takes this form
    engine: Engine

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def ping(self) -> None:
        """One round trip: returns when the database answers, raises when it does not."""
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    # Driver-level autocommit, so SQLAlchemy's "begin" event below owns the
    # transaction boundaries (pysqlite would otherwise skip BEGIN before DDL
    # and SELECT). A long busy timeout rides out cross-process contention.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    # Process-wide (every connection's page cache, DBOS's included): past it SQLite
    # reuses cached pages instead of growing, so memory stays put as the file grows.
    cur.execute(f"PRAGMA soft_heap_limit={SQLITE_HEAP_LIMIT}")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    # IMMEDIATE takes the write lock up front: no lock upgrades, no deadlocks
    # between the shim and worker processes sharing the file.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def sqlalchemy_url(url: str) -> str:
    if url.startswith("sqlite:///"):
        return url
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("postgresql+psycopg://"):
        return url
    raise GatehouseError(
        ErrorCode.INVALID_REQUEST,
        "GATEHOUSE_DATABASE_URL must start with sqlite:/// or postgresql://",
        {"url_scheme": url.split(":", 1)[0]},
    )


def open_database(url: str, timeouts: PgTimeouts | None = None) -> Database:
    """The engine for Gatehouse's own tables; on PostgreSQL every connection is
    bounded by ``timeouts`` (the defaults when None), see ``ledger._net``.

    At most ``timeouts.pool_size`` connections on PostgreSQL (GATEHOUSE_PG_POOL_SIZE),
    ``SQLITE_POOL_SIZE`` on SQLite, each kept once opened: a thread that finds them
    all in use waits for one rather than opening (and, returning it, closing) a
    connection of its own, which on PostgreSQL is a server process started per
    request under load."""
    sa_url = sqlalchemy_url(url)
    if sa_url.startswith("sqlite"):
        # no liveness check: a file's connection has no session to lose
        engine = sa.create_engine(sa_url, pool_size=SQLITE_POOL_SIZE, max_overflow=0)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        folder = wake_folder(url)
        if folder is not None:  # workers told of what a transaction queued, once it is over
            event.listen(engine, "checkin", lambda _c, record: send_pending(folder, record.info))
    else:
        bounds = timeouts or PgTimeouts()
        engine = sa.create_engine(
            sa_url,
            pool_size=bounds.pool_size,
            max_overflow=0,
            connect_args=connect_args(bounds, f"-c search_path={APP_SCHEMA}"),
        )
        event.listen(engine, "do_connect", timed_connect(bounds))
        event.listen(engine, "checkout", still_open)
    return Database(url=url, engine=engine)


def system_engine(url: str, timeouts: PgTimeouts | None = None) -> Engine | None:
    """The engine DBOS keeps its system tables through, on PostgreSQL: DBOS's own
    engine settings (``dbos._dbos_config``) with ``timeouts`` on every connection,
    and as many kept as Gatehouse's own pool (``timeouts.pool_size``). None on
    SQLite, where DBOS makes its own."""
    sa_url = sqlalchemy_url(url)
    if sa_url.startswith("sqlite"):
        return None
    bounds = timeouts or PgTimeouts()
    args = connect_args(bounds)
    args["application_name"] = "dbos_transact"
    engine = sa.create_engine(
        sa_url,
        pool_size=bounds.pool_size,
        max_overflow=0,
        pool_timeout=30,
        connect_args=args,
    )
    event.listen(engine, "do_connect", timed_connect(bounds))
    event.listen(engine, "checkout", still_open)
    return engine


def ensure_postgres_database(url: str) -> None:
    """Create the named PostgreSQL database if it does not exist yet."""
    sa_url = sa.make_url(sqlalchemy_url(url))
    if sa_url.get_backend_name() != "postgresql" or not sa_url.database:
        return
    admin = sa.create_engine(sa_url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": sa_url.database}
            ).first()
            if exists is None:
                conn.execute(sa.text(f'CREATE DATABASE "{sa_url.database}"'))
    finally:
        admin.dispose()


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc``, or anything that caused it, says the database cannot be reached.

    Refused or dropped connections, a server starting up or shutting down, a
    session the server terminated, a pool with no connection to give: each
    arrives wrapped differently (SQLAlchemy, psycopg, DBOS), and each passes
    once the database is back. A wrong query is not one of them.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OperationalError | InterfaceError | PoolTimeout):
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, psycopg.OperationalError | psycopg.InterfaceError):
            return True
        current = current.__cause__ or current.__context__
    return False


# SQLite's primary result code for "database or disk is full"
_SQLITE_FULL = 13
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
# PostgreSQL's disk_full: a relation, a temporary file or the WAL found no room
# (errcode_for_file_access maps ENOSPC to it). A WAL write that fails this way
# stops the server instead, which is waited out as a lost database.
_PG_DISK_FULL = "53100"


def storage_full(exc: BaseException) -> bool:
    """Whether ``exc``, or anything that caused it, says a disk is full: SQLite's
    "database or disk is full" (however SQLAlchemy or DBOS wrapped it), PostgreSQL's
    ``disk_full`` (SQLSTATE 53100: a table or index could not grow), an ``OSError``
    ENOSPC or EDQUOT from a file write, or ``storage_full`` already translated. Each
    passes once space is freed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, GatehouseError) and current.code is ErrorCode.STORAGE_FULL:
            return True
        if isinstance(current, sqlite3.Error) and (
            getattr(current, "sqlite_errorcode", None) == _SQLITE_FULL
            or "database or disk is full" in str(current)
        ):
            return True
        if isinstance(current, psycopg.Error) and current.sqlstate == _PG_DISK_FULL:
            return True
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            return True
        # SQLAlchemy keeps the driver's error in ``orig`` (and, raised from it, as the cause)
        orig = current.orig if isinstance(current, DBAPIError) else None
        current = orig or current.__cause__ or current.__context__
    return False


def no_space(what: str, exc: BaseException) -> GatehouseError:
    """``storage_full`` for a write that found its disk full (translated once, here)."""
    return GatehouseError(
        ErrorCode.STORAGE_FULL,
        f"{what}: the disk is full; nothing was stored",
        {"problem": str(exc)[:300], "retry_after_s": 5},
    )


def corrupt(table: str, key: str, exc: Exception) -> GatehouseError:
    """A row that failed validation when read back: ``corrupt_record``, never half-valid."""
    return GatehouseError(
        ErrorCode.CORRUPT_RECORD,
        f"a {table} row failed validation when read back",
        {"table": table, "key": key, "problem": str(exc)[:500]},
    )


def epoch_sql(expr: str, sqlite: bool) -> str:
    """SQL for the seconds since 1970 of ``expr``, an ISO 8601 text (column or ``'now'``)."""
    if sqlite:
        return f"(julianday({expr}) * 86400.0)"
    moment = "now()" if expr == "'now'" else f"CAST({expr} AS timestamptz)"
    return f"EXTRACT(EPOCH FROM {moment})"


def now_sql(sqlite: bool) -> str:
    """SQL for the database's own wall clock as ISO 8601 text in ``now_iso``'s form.
    On PostgreSQL that is the server's clock (``clock_timestamp()``, not the
    transaction's start); on SQLite, the clock of the process that runs the SQL."""
    if sqlite:
        return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    return "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"


def db_clock(conn: Conn) -> datetime:
    """The database's wall clock, for times several workers compare (due times, leases):
    one clock for all of them, whatever each worker's own says. SQLite's is this
    process's clock, as every writer of an embedded database shares its host."""
    text = conn.execute(sa.text(f"SELECT {now_sql(not is_postgres(conn))}")).scalar_one()
    return instant(str(text))


def instant(stamp: str) -> datetime:
    """A stamp in ``now_iso``'s form (or ``now_sql``'s) as an aware datetime."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def iso(at: datetime) -> str:
    """``now_iso``'s form for any moment (comparable as text with it)."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_postgres(conn: Conn) -> bool:
    """Whether ``conn`` is on PostgreSQL."""
    return conn.dialect.name == "postgresql"


def dbos_workflows(conn: Conn) -> str:
    """DBOS's table of workflows as ``conn`` names it: in schema ``dbos`` on
    PostgreSQL, beside Gatehouse's tables on SQLite."""
    return "dbos.workflow_status" if is_postgres(conn) else "workflow_status"
