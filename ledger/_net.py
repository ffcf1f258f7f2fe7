"""How long a PostgreSQL connection may go unanswered before it is given up.

A connection can die without a word: the server's host vanishes, a firewall or
NAT forgets the flow, a failover moves the address. Nothing arrives, not even a
reset, and a client blocked on a read waits for ever. Each layer gets a bound:

* **connect** -- ``connect_timeout``: a new connection that is not set up in
  time fails (and is retried by whoever asked for it).
* **TCP** -- keepalive probes on an idle connection (``keepalives_idle``,
  ``keepalives_interval``, ``keepalives_count``) and ``tcp_user_timeout`` on
  one with data unacknowledged: the kernel declares a silent peer dead.
* **server** -- ``statement_timeout`` and ``idle_in_transaction_session_timeout``
  end a statement, or a session left inside a transaction, that runs too long,
  so a lost client does not hold locks for ever.
* **client** -- a command whose answer does not come within ``answer_timeout_s``
  closes its connection and fails as a lost connection. This is the bound that
  holds when the kernel's does not: a peer that acknowledges every byte and
  answers none (a hung server or proxy, a peer on the same host).

A connection given up this way raises ``psycopg.OperationalError``, which
SQLAlchemy treats as a disconnect (the pool drops it) and which Gatehouse
already treats as "the database cannot be reached": the request answers 503, a
step retries, a worker waits for the database. PostgreSQL only; SQLite has no
network.
"""

from __future__ import annotations

import contextlib
import math
import select
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.conninfo import make_conninfo
from psycopg.pq import ConnStatus, TransactionStatus
from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DisconnectionError

from contracts import ErrorCode, GatehouseError

__all__ = [
    "AnswerBoundConnection",
    "PgTimeouts",
    "connect",
    "connect_args",
    "long_statements",
    "resolve_pg_timeouts",
    "still_open",
    "timed_connect",
]

_RV = TypeVar("_RV")

# psycopg's own poll interval while it waits on a socket.
_WAIT_INTERVAL = 0.1


@dataclass(frozen=True)
class PgTimeouts:
    """The bounds, in seconds (see the module docstring); the defaults suit a LAN."""

    connect_s: int = 5
    keepalive_idle_s: int = 10
    keepalive_interval_s: int = 5
    keepalive_count: int = 3
    tcp_user_timeout_s: float = 30.0
    statement_s: float = 60.0
    idle_in_transaction_s: float = 60.0
    answer_s: float = 90.0
    # Not a time: the connections each pool keeps (see ``ledger.open_database``).
    pool_size: int = 10

    def options(self) -> str:
        """The server-side settings, as libpq ``options`` (``-c name=value`` each)."""
        return (
            f"-c statement_timeout={_ms(self.statement_s)}"
            f" -c idle_in_transaction_session_timeout={_ms(self.idle_in_transaction_s)}"
        )


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def connect_args(timeouts: PgTimeouts, options: str = "") -> dict[str, str | int]:
    """libpq connection parameters carrying ``timeouts`` (``options`` goes first)."""
    return {
        "connect_timeout": timeouts.connect_s,
        "keepalives": 1,
        "keepalives_idle": timeouts.keepalive_idle_s,
        "keepalives_interval": timeouts.keepalive_interval_s,
        "keepalives_count": timeouts.keepalive_count,
        "tcp_user_timeout": _ms(timeouts.tcp_user_timeout_s),
        "options": f"{options} {timeouts.options()}".strip(),
    }


class _Unset:
    """No timeout given: the connection's own bound applies."""


_UNSET = _Unset()


class AnswerBoundConnection(psycopg.Connection[Any]):
    """A psycopg connection that gives up on a command unanswered for ``answer_s``.

    psycopg runs every command (execute, fetch, commit, rollback, a pool's
    ping) through ``wait`` without a timeout; here that wait is bounded. A
    wait given a timeout of its own (``notifies``, which idles by design on a
    LISTEN connection) keeps it.
    """

    answer_s: float | None = PgTimeouts.answer_s  # None: unbounded (see long_statements)

    def wait(
        self,
        gen: PQGen[_RV],
        interval: float = _WAIT_INTERVAL,
        timeout: float | _Unset | None = _UNSET,
    ) -> _RV:
        if not isinstance(timeout, _Unset):
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, self.answer_s)
        except psycopg.OperationalError as exc:
            # psycopg's wait timeout is a private OperationalError subclass; what
            # matters is that the bound passed and the connection state is unknown.
            if exc.__class__.__name__ != "_WaitTimeout":
                raise
            self.pgconn.finish()  # as psycopg does with a query that ignores a cancel
            raise psycopg.OperationalError(
                f"the database server did not answer within {self.answer_s} s;"
                " the connection was closed"
            ) from exc


@contextlib.contextmanager
def long_statements(conn: Connection) -> Iterator[None]:
    """Within this block, ``conn`` (in a transaction) may run statements of any length:
    a migration on a big database. No ``statement_timeout`` for the transaction, no
    answer bound on the connection (restored before it goes back to the pool)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
    dbapi = conn.connection.dbapi_connection
    if not isinstance(dbapi, AnswerBoundConnection):
        yield
        return
    saved, dbapi.answer_s = dbapi.answer_s, None
    try:
        yield
    finally:
        dbapi.answer_s = saved


def connect(url: str, timeouts: PgTimeouts, autocommit: bool = False) -> AnswerBoundConnection:
    """A plain psycopg connection (``postgresql://`` URL) under ``timeouts``."""
    conninfo = make_conninfo(url, **connect_args(timeouts))
    conn = AnswerBoundConnection.connect(conninfo, autocommit=autocommit)
    conn.answer_s = timeouts.answer_s
    return conn


def timed_connect(timeouts: PgTimeouts) -> Callable[..., AnswerBoundConnection]:
    """A SQLAlchemy ``do_connect`` listener opening :class:`AnswerBoundConnection`\\ s."""

    def do_connect(
        _dialect: object, _record: object, cargs: tuple[Any, ...], cparams: dict[str, Any]
    ) -> AnswerBoundConnection:
        conn = AnswerBoundConnection.connect(*cargs, **cparams)
        conn.answer_s = timeouts.answer_s
        return conn

    return do_connect


# What a socket with something to read, or a broken link, reports to poll(2).
_SPOKE = select.POLLIN | select.POLLERR | select.POLLHUP


def still_open(dbapi_conn: DBAPIConnection, _record: object, _proxy: object) -> None:
    """A SQLAlchemy ``checkout`` listener: a pooled connection whose session ended
    while it sat in the pool is replaced before anyone uses it, with no round trip.

    An idle session has nothing to say: the server writes on a connection only in
    answer to a command. When it ends one (``pg_terminate_backend``, a shutdown or
    restart, its idle bounds) it writes a last error and closes the socket, and a
    link the kernel gave up on (keepalives, the TCP user timeout) reports an error:
    each makes the socket ready to read. Such a connection, or one psycopg already
    knows is broken or left inside a transaction, is refused here
    (``DisconnectionError``), and the pool opens another in its place.

    This stands in for SQLAlchemy's ``pool_pre_ping``, a round trip on every
    checkout (each one a transaction in PostgreSQL's statistics): half of what an
    idle worker committed, and a round trip before every transaction of a run. What
    neither notices, a server gone without a word before any keepalive lapsed, fails
    the first statement instead of the ping, as a session ended between the ping and
    the statement always could: either is the database away
    (``ledger.database_unreachable``), a step tried again, an answer to try again."""
    if not isinstance(dbapi_conn, psycopg.Connection):
        return
    pg = dbapi_conn.pgconn
    if (
        dbapi_conn.closed
        or pg.status != ConnStatus.OK
        or pg.transaction_status != TransactionStatus.IDLE
        or pg.socket < 0
    ):
        raise DisconnectionError("the pooled connection's session has ended")
    watch = select.poll()
    watch.register(pg.socket, _SPOKE)
    if watch.poll(0):
        raise DisconnectionError("the server spoke on an idle pooled connection: its session ended")


# ------------------------------------------------------------ settings
_ENV = {
    "connect_s": "GATEHOUSE_PG_CONNECT_TIMEOUT_S",
    "keepalive_idle_s": "GATEHOUSE_PG_KEEPALIVE_IDLE_S",
    "keepalive_interval_s": "GATEHOUSE_PG_KEEPALIVE_INTERVAL_S",
    "keepalive_count": "GATEHOUSE_PG_KEEPALIVE_COUNT",
    "tcp_user_timeout_s": "GATEHOUSE_PG_TCP_USER_TIMEOUT_S",
    "statement_s": "GATEHOUSE_PG_STATEMENT_TIMEOUT_S",
    "idle_in_transaction_s": "GATEHOUSE_PG_IDLE_IN_TRANSACTION_S",
    "answer_s": "GATEHOUSE_PG_ANSWER_TIMEOUT_S",
    "pool_size": "GATEHOUSE_PG_POOL_SIZE",
}
_WHOLE = frozenset(
    {"connect_s", "keepalive_idle_s", "keepalive_interval_s", "keepalive_count", "pool_size"}
)


def resolve_pg_timeouts(env: Mapping[str, str]) -> PgTimeouts:
    """The bounds from ``GATEHOUSE_PG_*`` (unset: the defaults of :class:`PgTimeouts`)."""
    values: dict[str, Any] = {}
    for attr, name in _ENV.items():
        raw = env.get(name, "").strip()
        if not raw:
            continue
        try:
            value = int(raw) if attr in _WHOLE else float(raw)
        except ValueError as exc:
            kind = "a whole number" if attr in _WHOLE else "a number of seconds"
            raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{name} must be {kind}") from exc
        if value <= 0 or (attr == "connect_s" and value < 2):
            least = "at least 2 (libpq's floor)" if attr == "connect_s" else "more than 0"
            raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{name} must be {least}")
        values[attr] = value
    timeouts = PgTimeouts(**values)
    if timeouts.answer_s <= timeouts.statement_s:
        # The server ends a long statement itself and says so; the client only
        # gives up on a connection that could not even say that.
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            "GATEHOUSE_PG_ANSWER_TIMEOUT_S must be more than GATEHOUSE_PG_STATEMENT_TIMEOUT_S",
        )
    return timeouts
