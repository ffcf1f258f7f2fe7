"""The two ways the records run a database step.

* ``tx`` — a DBOS step whose body is one transaction of ours: DBOS looks the
  step up, the body commits, DBOS writes the checkpoint (three transactions).
  A crash between the body's commit and the checkpoint runs the body again,
  so every body run this way writes nothing new the second time (rows keyed
  by what they record, ``ON CONFLICT DO NOTHING``, updates to the same value).
* ``atomic_tx`` — a DBOS datasource transaction: the rows and the workflow's
  checkpoint commit together (five transactions with DBOS's own look-ups and
  ownership check), for a body that must not run twice.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from dbos import DBOS
from dbos._datasource import DatasourceOptions
from sqlalchemy.engine import Connection

from contracts import JsonObject
from ledger import Conn, database_unreachable
from worker._runtime import runtime
from worker._storage import wait_for_space

__all__ = ["atomic_tx", "exec_id", "session", "tx"]

# The transaction of the ``tx`` step in progress on this thread, if any.
_open: ContextVar[Connection | None] = ContextVar("gatehouse_records_tx", default=None)


def tx(name: str, fn: Callable[[JsonObject], JsonObject], arg: JsonObject) -> JsonObject:
    """Run ``fn`` (idempotent) in one transaction, as the DBOS step ``name``."""

    def once(a: JsonObject) -> JsonObject:
        with runtime().db.engine.begin() as conn:
            token = _open.set(conn)
            try:
                return fn(a)
            finally:
                _open.reset(token)

    def body(a: JsonObject) -> JsonObject:
        # A full disk rolls the transaction back (nothing half-written) and is waited out
        # here: the step stays not-complete until its rows (and anchor line) are stored.
        return wait_for_space(name, lambda: once(a))

    return DBOS.run_step(
        {
            "name": name,
            "retries_allowed": True,
            "max_attempts": 6,
            "interval_seconds": 0.5,
            "backoff_rate": 2.0,
            "should_retry": database_unreachable,
        },
        body,
        arg,
    )


def atomic_tx(name: str, fn: Callable[[JsonObject], JsonObject], arg: JsonObject) -> JsonObject:
    """Run ``fn`` as the DBOS datasource transaction ``name``: its rows and the
    workflow's checkpoint commit together."""
    rt = runtime()
    # Each transaction touches one run's rows; READ COMMITTED avoids needless
    # serialization retries on PostgreSQL. SQLite serializes writers anyway.
    options: DatasourceOptions = {
        "name": name,
        "isolation_level": "SERIALIZABLE" if rt.db.is_sqlite else "READ COMMITTED",
    }
    return rt.ds.run_tx_step(options, fn, arg)


def session() -> Conn:
    """The transaction of the step in progress (``tx`` or ``atomic_tx``)."""
    conn = _open.get()
    return conn if conn is not None else runtime().ds.sql_session()


def exec_id() -> str:
    return runtime().settings.executor_id
