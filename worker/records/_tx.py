"""The one way the records run a database step: a DBOS datasource transaction."""

from __future__ import annotations

from collections.abc import Callable

from dbos._datasource import DatasourceOptions
from sqlalchemy.orm import Session

from contracts import JsonObject
from worker._runtime import runtime

__all__ = ["exec_id", "session", "tx"]


def tx(name: str, fn: Callable[[JsonObject], JsonObject], arg: JsonObject) -> JsonObject:
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


def session() -> Session:
    """The session of the datasource transaction in progress."""
    return runtime().ds.sql_session()


def exec_id() -> str:
    return runtime().settings.executor_id
