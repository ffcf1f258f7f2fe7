"""Waits that are over, ended without a sleeper.

No workflow waits out an approval's timeout: a parked run's row says when its
wait expires (``runs.parked_until``). The reaper's leader sweeps every tick
for waits past that time and hands each run to its next stretch, in the
transaction that takes the park (the reaper's tick finds them:
``worker.durable._recovery.due``); the stretch finds no decision past the
deadline and ends the run (``approval_timeout``, or an interactive session
closed). A decision that arrives after the deadline is refused by the shim
even when this sweep is late.
"""

from __future__ import annotations

import logging

from dbos import DBOSClient

from ledger import stretches, work_queue
from worker.runtime import Runtime

__all__ = ["close_client", "expire_waits"]

_log = logging.getLogger("gatehouse.expiry")

# The client the sweep enqueues stretches with in its transactions, one per process
# (made on first use; it opens no connection of its own: ``work_queue.enqueuer``).
_clients: list[DBOSClient] = []


def _client(rt: Runtime) -> DBOSClient:
    if not _clients:
        _clients.append(work_queue.enqueuer(rt.db))
    return _clients[0]


def close_client() -> None:
    """At the worker's stop: the sweep's client, if it made one."""
    while _clients:
        _clients.pop().destroy()


def expire_waits(rt: Runtime, due: list[str]) -> list[str]:
    """Hand each of these runs, found with its wait over (``stretches.expired``), to
    its next stretch; the run ids handed on."""
    handed: list[str] = []
    for run_id in due:
        with rt.db.engine.begin() as conn:
            # taken under the run's row lock: a decision that got in first wins
            locked = stretches.lock(conn, run_id)
            found = None if locked is None else locked.parked
            if found is None or not stretches.deadline_passed(found.until):
                continue
            version = rt.settings.app_version
            taken = stretches.hand_off(conn, _client(rt), version, run_id, locked=locked)
            if taken.handoff is not None:
                handed.append(run_id)
    if handed:
        _log.info("%d wait(s) expired; their runs handed on", len(handed))
    return handed
