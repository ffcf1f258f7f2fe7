"""Where a run is parked between two stretches, and the hand-off to the next one.

A run is split at every human decision: the stretch that reaches a decision
nobody has made yet parks the run (``park``) and its workflow ends. Whoever
writes the decision takes the park in the same transaction and enqueues the
next stretch (``hand_off``). Both lock the run's row first (``lock``, a no-op
UPDATE), so a decision either lands before the park (the parking stretch reads
it and goes on) or finds the park (and hands the run to a new stretch): never
neither, never both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

import sqlalchemy as sa
from pydantic import ValidationError

from contracts import (
    STRETCH_WORKFLOW,
    Continuation,
    JsonObject,
    RunStatus,
    StretchJob,
    canonical_json,
    queue_partition,
)
from ledger import runs
from ledger._db import Conn, dbos_workflows, iso, now_iso, sql
from ledger._row_locks import run_held
from ledger._statement import execute
from ledger.work_queue import enqueue_options, queue_in_transaction

if TYPE_CHECKING:  # the CLI imports the ledger; DBOS is loaded only where a client is made
    from dbos import DBOSClient

__all__ = [
    "LATEST_WORKFLOW_SQL",
    "HandedOff",
    "Handoff",
    "Locked",
    "Parked",
    "answered",
    "deadline_passed",
    "expired",
    "hand_off",
    "is_split",
    "lock",
    "park",
    "run_of",
    "stretch_of",
    "until",
    "workflow_id",
    "workflow_ids",
]


@dataclass(frozen=True)
class Parked:
    """A run parked at one of its flow's waits."""

    run_id: str
    stretch: int
    wait: int
    at: str
    until: str | None
    version: str | None  # the application version of the stretch that parked it
    partition: str  # the queue partition its stretches run in (its submitter's)


@dataclass(frozen=True)
class Locked:
    """A run's row, locked: whether it is split at its decisions (False: begun before
    version 18, it waits in place in one workflow), where it is parked, if it is, and
    the stretch it is in (None: not split); and what a decision's transaction checks
    under the lock, read with it: the run's status and submitter, the boundary and
    expiry of the wait it is at (parked, or handed on and not yet answered), the
    continuation its park wrote, and DBOS's status of its latest stretch's workflow
    (None: DBOS has none).

    All but the last are the run's own row, as it is once the lock is held: on
    PostgreSQL an UPDATE that waited for another transaction's lock returns the row
    that transaction committed. Another table read in the same statement is read as
    it was when the statement began, before the wait: a cancel on record (which its
    writer commits under this lock) is read by a statement of its own after the lock
    (``ledger.cancels.get``). DBOS's status is no record of ours and takes no lock of
    ours: read here, it is as late as it is anywhere."""

    split: bool
    parked: Parked | None
    stretch: int | None
    status: RunStatus
    submitted_by: str
    wait: tuple[str, str | None] | None
    continuation: str | None
    workflow_status: str | None

    def superseded(self, stretch: int) -> bool:
        """Whether a later stretch than ``stretch`` has the run: a decision handed it
        on. An execution of ``stretch`` that finds this is a stale one (DBOS ran a
        step of it again after its park was taken) and must do nothing more."""
        return self.stretch is not None and self.stretch > stretch


@dataclass(frozen=True)
class Handoff:
    """What the next stretch is started with: its number, the wait it resumes at,
    that wait's expiry and, at a decision, where the run goes on (``continuation``)."""

    run_id: str
    stretch: int
    wait: int
    until: str | None
    version: str | None
    partition: str
    continuation: JsonObject | None = None

    @property
    def workflow_id(self) -> str:
        return workflow_id(self.run_id, self.stretch)


@dataclass(frozen=True)
class HandedOff:
    """What a decision's transaction found: whether the run is split, and the
    stretch it handed the run to (None: the run was not parked)."""

    split: bool
    handoff: Handoff | None


def run_of(workflow_id: str) -> str:
    """The run a workflow is a stretch of (``RUN_ID`` or ``RUN_ID:N``)."""
    return workflow_id.split(":", 1)[0]


def stretch_of(workflow_id: str) -> int:
    """Which stretch of its run a workflow is: N for ``RUN_ID:N``, 0 for ``RUN_ID``."""
    _, colon, n = workflow_id.partition(":")
    return int(n) if colon and n.isdigit() else 0


def until(seconds: float | None) -> str | None:
    """The expiry of a wait that starts now and lasts ``seconds`` (None: never)."""
    return None if seconds is None else iso(datetime.now(UTC) + timedelta(seconds=seconds))


def deadline_passed(deadline: str | None) -> bool:
    return deadline is not None and deadline <= now_iso()


@cache
def _lock_sql(workflows: str) -> str:
    """The lock's statement, DBOS's workflow table named as the connection names it."""
    return (
        "UPDATE runs SET updated_at = updated_at WHERE run_id = :r"  # noqa: S608  (fixed names)
        " RETURNING stretch, parked_wait, parked_at, parked_until, parked_version,"
        " submitted_by, status, continuation_json,"
        f" (SELECT w.status FROM {workflows} w WHERE w.workflow_uuid = {LATEST_WORKFLOW_SQL})"
    )


def lock(conn: Conn, run_id: str) -> Locked | None:
    """Take the run's row lock (a no-op UPDATE); None when there is no such run. One
    statement, whatever of the row the caller goes on to check (``Locked``)."""
    found = execute(conn, sql(_lock_sql(dbos_workflows(conn))), {"r": run_id}).first()
    if found is None:
        return None
    run_held(conn, run_id)
    stretch, wait, at, deadline, version, submitter, status, then, dbos = tuple(found)
    current = None if stretch is None else int(str(stretch))
    parked = None
    if wait is not None:
        parked = Parked(
            run_id,
            current or 0,
            int(str(wait)),
            str(at),
            None if deadline is None else str(deadline),
            None if version is None else str(version),
            queue_partition(str(submitter)),
        )
    return Locked(
        split=stretch is not None,
        parked=parked,
        stretch=current,
        status=runs.status_of(run_id, str(status)),
        submitted_by=str(submitter),
        wait=None if at is None else (str(at), None if deadline is None else str(deadline)),
        continuation=None if then is None else str(then),
        workflow_status=None if dbos is None else str(dbos),
    )


def park(
    conn: Conn,
    run_id: str,
    *,
    wait: int,
    at: str,
    deadline: str | None,
    version: str,
    continuation: JsonObject | None = None,
) -> None:
    """Park the run at ``wait`` (the caller holds the run's row lock); ``version``:
    the application version of the stretch that parks it (a record: the next
    stretch runs under the release that hands it off). ``continuation``: where the
    run goes on once the wait is answered (``contracts.Continuation``, at a decision
    wait), handed to the next stretch in its job; None, at any other wait, clears
    what an earlier park wrote."""
    execute(
        conn,
        sql(
            "UPDATE runs SET parked_wait = :w, parked_at = :a, parked_until = :u,"
            " parked_since = :t, parked_version = :v, stretch = COALESCE(stretch, 0),"
            " continuation_json = :c WHERE run_id = :r"
        ),
        {
            "w": wait,
            "a": at,
            "u": deadline,
            "t": now_iso(),
            "v": version,
            "c": None if continuation is None else canonical_json(continuation),
            "r": run_id,
        },
    )


def _next(locked: Locked) -> Handoff | None:
    """The stretch a parked run is handed to (None: it is not parked)."""
    found = locked.parked
    if found is None:
        return None
    then = None if locked.continuation is None else _continuation(locked.continuation, found.at)
    nxt = found.stretch + 1
    return Handoff(found.run_id, nxt, found.wait, found.until, found.version, found.partition, then)


def _take(conn: Conn, handoff: Handoff, *, answered: bool) -> None:
    """The park taken for ``handoff``'s stretch. The wait's boundary and expiry stay
    until the next stretch has taken what was decided (``answered``): a decision that
    comes in meanwhile is held to them. ``answered``: it is taken already."""
    done = (", parked_at = NULL, parked_until = NULL, continuation_json = NULL"
            if answered else "")  # fmt: skip
    execute(
        conn,
        sql(
            f"UPDATE runs SET stretch = :n, parked_wait = NULL, parked_since = NULL{done}"  # noqa: S608  (fixed text)
            " WHERE run_id = :r"
        ),
        {"n": handoff.stretch, "r": handoff.run_id},
    )


def _continuation(text: str, at: str) -> JsonObject | None:
    """The continuation a park wrote, for the next stretch's job: only one written for
    the wait taken (one a release before gatehouse-7 left behind a later park, which
    it does not clear, is not) and only one this release reads. Anything else (a
    record changed behind Gatehouse's back) is dropped: the stretch then goes on from
    the ledger, as after a park without one."""
    try:
        then = Continuation.model_validate_json(text)
    except ValidationError:
        return None
    return then.model_dump(mode="json") if then.at == at else None


def answered(conn: Conn, run_id: str) -> None:
    """The run's wait got its answer: it no longer has a boundary or an expiry."""
    execute(
        conn,
        sql(
            "UPDATE runs SET parked_wait = NULL, parked_at = NULL, parked_until = NULL,"
            " parked_since = NULL, continuation_json = NULL"
            " WHERE run_id = :r AND parked_at IS NOT NULL"
        ),
        {"r": run_id},
    )


def expired(conn: Conn, limit: int = 100) -> list[str]:
    """Runs parked at a wait whose expiry has passed (for the expiry sweep)."""
    rows = execute(
        conn,
        sql(
            "SELECT run_id FROM runs WHERE parked_wait IS NOT NULL AND parked_until <= :t"
            " ORDER BY parked_until LIMIT :n"
        ),
        {"t": now_iso(), "n": limit},
    ).all()
    return [str(r[0]) for r in rows]


def hand_off(
    conn: Conn,
    client: DBOSClient,
    app_version: str,
    run_id: str,
    *,
    decide: Callable[[JsonObject], JsonObject | None] | None = None,
    locked: Locked | None = None,
) -> HandedOff:
    """Inside the transaction that wrote a decision (or a cancel, a resolution, a
    message, an expiry): if the run is parked, take the park and enqueue its next
    stretch in this same transaction, under ``app_version``, the release of
    whoever hands it off. A parked run holds no workflow: its next stretch is a
    new one, which starts at the decision from the continuation its park wrote
    (at another wait, or parked before gatehouse-7, from what the ledger recorded:
    ``worker.durable``'s stretch ports answer everything before the wait from it,
    as a replay does), so it runs under whatever release is current, not the one
    the run parked under. The workflow id ``RUN_ID:N`` is unique, so a stretch exists once
    whoever hands it off. No stretch when the run was not parked (a stretch that
    is still running reads the decision when it gets there). ``decide``: the caller
    wrote a decision, and takes it here, given the continuation of a run parked with
    one (its records written in this transaction: the decision's answer for the job,
    and the wait answered with the park taken; or None to leave it to the stretch).
    ``locked``: the run's row as the caller locked it in this transaction already."""
    if locked is None:
        locked = lock(conn, run_id)
    handoff = None if locked is None else _next(locked)
    if handoff is None:
        return HandedOff(locked is not None and locked.split, None)
    then = handoff.continuation
    decided = None if decide is None or then is None else decide(then)
    _take(conn, handoff, answered=decided is not None)
    job = StretchJob(
        run_id=run_id,
        stretch=handoff.stretch,
        resume_wait=handoff.wait,
        until=handoff.until,
        continuation=then,
        decided=decided,
    )
    options = enqueue_options(STRETCH_WORKFLOW, handoff.workflow_id, app_version, handoff.partition)
    queue_in_transaction(conn, client, options, job.model_dump(mode="json"))
    return HandedOff(True, handoff)


def is_split(conn: Conn, run_id: str) -> bool:
    """Whether the run is split at its decisions (False: begun before version 18, it
    waits in place in its one workflow, woken by a message)."""
    found = execute(conn, sql("SELECT stretch FROM runs WHERE run_id = :r"), {"r": run_id}).first()
    return found is not None and found[0] is not None


def workflow_ids(conn: Conn, run_ids: list[str]) -> dict[str, str]:
    """Each run's latest workflow (``RUN_ID`` for its first stretch or a run begun
    before the split, ``RUN_ID:N`` after), mapped to the run."""
    if not run_ids:
        return {}
    stmt = sql("SELECT run_id, stretch FROM runs WHERE run_id IN :r").bindparams(
        sa.bindparam("r", expanding=True)
    )
    return {workflow_id(str(r), s): str(r) for r, s in execute(conn, stmt, {"r": run_ids})}


def workflow_id(run_id: str, stretch: int | None) -> str:
    """The workflow of the run's stretch ``stretch``: ``RUN_ID`` for its first (0) or a
    run begun before the split (None), ``RUN_ID:N`` after. The one place the id is made
    (and ``LATEST_WORKFLOW_SQL``, the same in SQL, tested to agree)."""
    return run_id if not stretch else f"{run_id}:{stretch}"


# ``workflow_id`` of a ``runs`` row's latest stretch, in SQL (in a statement on ``runs``).
LATEST_WORKFLOW_SQL = (
    "CASE WHEN runs.stretch IS NULL OR runs.stretch = 0 THEN runs.run_id"
    " ELSE runs.run_id || ':' || runs.stretch END"
)
