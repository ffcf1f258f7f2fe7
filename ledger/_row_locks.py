"""A run's row lock, taken once per transaction (PostgreSQL).

Whatever appends to a run's event stream or its hash chain first locks the
run's row, so two transactions that add to one run are serialized
(``ledger.events``, ``ledger.chain``). A transaction that records a tool call
appends several times (the chain link, ``ledger.written``, ``step.finished``,
an episode), and one that changes the run's status has already locked the
row with its UPDATE: the lock is held until the transaction ends, so asking
for it again is a round trip that changes nothing. Here each transaction
remembers which runs' rows it holds.

A lock taken inside a nested transaction (a SAVEPOINT) is not remembered: a
rollback to the savepoint would release it. SQLite has one writer at a time,
and nothing to lock.
"""

from __future__ import annotations

import weakref

from sqlalchemy.engine import Transaction

from ledger._db import Conn, is_postgres, sql
from ledger._statement import execute

__all__ = ["hold_run", "run_held"]

_LOCK = sql("SELECT 1 FROM runs WHERE run_id = :r FOR UPDATE")
# the runs whose rows each open transaction holds; gone with the transaction
_held: weakref.WeakKeyDictionary[Transaction, set[str]] = weakref.WeakKeyDictionary()


def _outer(conn: Conn) -> Transaction | None:
    """The transaction ``conn`` is in, when a lock taken now lasts until it ends."""
    if conn.in_nested_transaction():
        return None
    return conn.get_transaction()


def hold_run(conn: Conn, run_id: str) -> None:
    """On PostgreSQL, hold the run's row lock until the transaction ``conn`` is in ends:
    taken with its first call in the transaction, a no-op after."""
    if not is_postgres(conn):
        return
    outer = _outer(conn)
    if outer is not None and run_id in _held.get(outer, ()):
        return
    execute(conn, _LOCK, {"r": run_id})
    _remember(outer, run_id)


def run_held(conn: Conn, run_id: str) -> None:
    """Say that the transaction ``conn`` is in has locked the run's row (an UPDATE of
    it that changed a row, or ``hold_run``)."""
    if is_postgres(conn):
        _remember(_outer(conn), run_id)


def _remember(outer: Transaction | None, run_id: str) -> None:
    """Note the lock for the transaction it lasts as long as (None: a savepoint's,
    released by a rollback to it, so not noted)."""
    if outer is not None:
        _held.setdefault(outer, set()).add(run_id)
