"""The two ways a record (``worker.records``) runs as a database step.

* ``tx`` — a DBOS step whose body is one transaction of ours: DBOS looks the
  step up, the body commits, DBOS writes the checkpoint (three transactions).
  A crash between the body's commit and the checkpoint runs the body again,
  so every body run this way writes nothing new the second time.
* ``atomic_tx`` — a DBOS datasource transaction: the rows and the workflow's
  checkpoint commit together (five transactions with DBOS's own look-ups and
  ownership check), for a body that must not run twice.

A full disk rolls a body's transaction back and is waited out in place; a lost
database is retried a few times by DBOS.
"""

from __future__ import annotations

from collections.abc import Callable

from dbos import DBOS, StepOptions

from contracts import JsonObject
from ledger import Conn, database_unreachable
from worker.durable._dbos import DatasourceOptions
from worker.durable._state import datasource
from worker.runtime import WorkerSettings, runtime, wait_for_space

__all__ = ["Body", "atomic_tx", "retried", "tx"]

Body = Callable[[Conn, JsonObject, WorkerSettings], JsonObject]


def tx(name: str, body: Body, arg: JsonObject) -> JsonObject:
    """Run ``body`` (idempotent) in one transaction, as the DBOS step ``name``."""
    rt = runtime()

    def once(a: JsonObject) -> JsonObject:
        with rt.db.engine.begin() as conn:
            return body(conn, a, rt.settings)

    def step(a: JsonObject) -> JsonObject:
        # A full disk rolls the transaction back (nothing half-written) and is waited out
        # here: the step stays not-complete until its rows (and anchor line) are stored.
        return wait_for_space(name, lambda: once(a))

    return DBOS.run_step(retried(name), step, arg)


def retried(name: str) -> StepOptions:
    """A step's options: tried again (0.5 s, doubling, 6 times) while the database
    cannot be reached."""
    return {
        "name": name,
        "retries_allowed": True,
        "max_attempts": 6,
        "interval_seconds": 0.5,
        "backoff_rate": 2.0,
        "should_retry": database_unreachable,
    }


def atomic_tx(name: str, body: Body, arg: JsonObject) -> JsonObject:
    """Run ``body`` as the DBOS datasource transaction ``name``: its rows and the
    workflow's checkpoint commit together."""
    rt = runtime()
    ds = datasource()
    # Each transaction touches one run's rows; READ COMMITTED avoids needless
    # serialization retries on PostgreSQL. SQLite serializes writers anyway.
    options: DatasourceOptions = {
        "name": name,
        "isolation_level": "SERIALIZABLE" if rt.db.is_sqlite else "READ COMMITTED",
    }

    def inside(a: JsonObject) -> JsonObject:
        return body(ds.sql_session(), a, rt.settings)

    return ds.run_tx_step(options, inside, arg)
