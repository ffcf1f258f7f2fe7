"""Waiting on a run without polling it: ``GET /runs/{run_id}/wait``.

A client asks once and is answered when the run reaches a status it waits for
(by default: one where a person must act, or the end), or when its timeout
passes. The waiting itself costs a wake-up, not a poll (``RunWatch``).
"""

from __future__ import annotations

import asyncio

from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError, RunStatus, RunView
from shim.api.services import reads
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["DEFAULT_UNTIL", "UNTIL_PATTERN", "parse_until", "wait_for_run"]

# What a client waits for unless it says: a person must act, or the run is over.
DEFAULT_UNTIL = frozenset(
    {RunStatus.WAITING_APPROVAL, RunStatus.NEEDS_OPERATOR, RunStatus.WAITING_INPUT}
    | {s for s in RunStatus if s.terminal}
)


_ONE = "(" + "|".join(s.value for s in RunStatus) + ")"
# What ``until`` may be, as the served contract says it: statuses, comma-separated
# (spaces around each allowed), or nothing (the default).
UNTIL_PATTERN = rf"^( *{_ONE} *(, *{_ONE} *)*| *)$"


def parse_until(raw: str | None) -> frozenset[RunStatus]:
    """``waiting_approval,succeeded`` → those statuses (ValueError naming a bad one).
    A finished run is always an answer: nothing more will happen to it."""
    if raw is None or not raw.strip():
        return DEFAULT_UNTIL
    wanted = set()
    for part in raw.split(","):
        name = part.strip()
        try:
            wanted.add(RunStatus(name))
        except ValueError:
            known = ", ".join(s.value for s in RunStatus)
            raise ValueError(f"unknown status {name!r} in until; known: {known}") from None
    return frozenset(wanted | {s for s in RunStatus if s.terminal})


async def wait_for_run(
    service: Service, run_id: str, who: Identity, until: str | None, timeout_s: float
) -> tuple[RunView, bool]:
    """(the run, whether its status is one of ``until``) once it is, or ``timeout_s`` passed.
    Whoever may read the run may wait on it."""
    try:
        wanted = parse_until(until)
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, str(exc)) from exc
    # Exists and is theirs to see (the first look at its status says, once the wait
    # is registered for its changes): its status alone is read until it is one waited
    # for, and the whole run (a handful of reads) once, for the answer.
    looked = False

    async def status() -> RunStatus | None:
        nonlocal looked
        if looked:
            return await run_in_threadpool(reads.status, service, run_id)
        looked = True
        return await run_in_threadpool(reads.seen_status, service, run_id, who)

    try:
        await service.watch.wait(run_id, status, wanted, timeout_s)
    except asyncio.CancelledError:
        # The shim is stopping: its server's graceful shutdown cancels the requests
        # still open once its grace is over. The wait ends here as a timeout (the
        # run as it now is), so the client asks again, of the next shim, instead
        # of hearing an error 500 for a wait nobody failed. The run is read here,
        # in the loop's own thread (the request is cancelled: it can await nothing
        # more), as the server stops.
        return reads.run(service, run_id, who), False
    view = await run_in_threadpool(reads.run, service, run_id, who)
    return view, view.status in wanted
