"""Putting runs back to work: a dead worker's, and those a full disk stopped.

What the reaper (``worker.runtime``) has DBOS do, given to it as its ``Upkeep``:

* ``hand_over`` — a dead worker's PENDING workflows re-enqueued, so a live
  worker adopts each (re-enqueueing admits exactly one runner);
* ``resume_stranded`` — workflows a full disk stopped in this process put back
  on the queue once the database takes writes again;
* ``look_for_work`` — every worker's look at the queues, in the same tick:
  work nobody was told of, DBOS's internal queue and DBOS's timers;
* ``due`` — the leader's look, read inside the reaper's tick transaction: runs
  no workflow will carry on (cancelled through DBOS, ended in an error or lost,
  or cancelled while still queued: ``_cancel.end_stopped``), runs a full disk
  ended in DBOS whose worker died,
  parked runs whose wait is over, and work queued with no partition key (an
  older release's); when any is found, the pass that ends the first, re-queues
  the second, hands the third to the stretch that ends them (``_expiry``) and
  puts the fourth in ``LEGACY_PARTITION``, run after that transaction.
"""

from __future__ import annotations

import logging
import time

from dbos import DBOS

from contracts import INTENT_QUEUE, LEGACY_PARTITION
from ledger import (
    Conn,
    Database,
    cancels,
    checkpoints,
    executors,
    storage_full,
    stretches,
    work_queue,
)
from worker.durable._cancel import end_stopped
from worker.durable._dbos import DBOS_INTERNAL_QUEUE, dbos_application, recover_pending_workflows
from worker.durable._expiry import expire_waits
from worker.durable._wake import dbos_work_due, look_again
from worker.runtime import Pass, Runtime, Upkeep, resumed, runtime, stranded_now

__all__ = [
    "UPKEEP",
    "due",
    "hand_over",
    "look_for_work",
    "pending",
    "requeue_orphaned",
    "resume_stranded",
]

_log = logging.getLogger("gatehouse.storage")


def hand_over(executor_ids: list[str]) -> list[str]:
    """Re-enqueue the PENDING workflows of these dead workers; the ids handed over."""
    ids = recover_pending_workflows(executor_ids)
    if ids:
        _tell_workers()
    return ids


def _tell_workers() -> None:
    """Tell the workers that runs were put back on the queue, in any partitions
    (``worker.durable._wake``), so one claims them now, not at its next poll. Best
    effort: that poll finds them if this cannot be said."""
    try:
        with runtime().db.engine.begin() as conn:
            work_queue.notify_work(conn, work_queue.ANY_PARTITION)
    except Exception:  # noqa: BLE001  (the fallback poll covers it)
        _log.debug("could not tell the workers of re-queued runs", exc_info=True)


def pending(executor_id: str, app_version: str) -> int:
    """How many workflows of this worker and version DBOS still holds PENDING."""
    left = DBOS.list_workflows(
        status="PENDING",
        executor_id=executor_id,
        app_version=app_version,
        load_input=False,
        load_output=False,
    )
    return len(left)


def resume_stranded(db: Database) -> list[str]:
    """Put every stranded workflow back on a queue (DBOS runs it on from its checkpoints:
    the step whose write failed was never recorded, so it runs again). Those still
    stranded (the disk is still full) stay noted. Called by the reaper every tick.
    A workflow whose error DBOS did manage to record (``ERROR``, which
    ``resume_workflow`` leaves alone) is put back on the queue the same way."""
    done = []
    for workflow_id in stranded_now():
        try:
            DBOS.resume_workflow(workflow_id, queue_name=INTENT_QUEUE)
            with db.engine.begin() as conn:
                executors.requeue_errored(conn, workflow_id, INTENT_QUEUE)
        except Exception as exc:
            if not storage_full(exc):
                raise
            break
        done.append(workflow_id)
        resumed(workflow_id)
    if done:
        _log.warning("resumed %d run(s) stopped by a full disk", len(done))
        _tell_workers()
    return done


def requeue_orphaned(db: Database, workflow_ids: list[str]) -> list[str]:
    """Put back on the queue these workflows, found ended in ``ERROR`` for a full disk
    while their runs never ended (``executors.errored_on_full_disk``), whoever's they
    were. ``stranded`` notes a run in its worker's memory only (the disk is full:
    nothing can be written), so a worker that dies before space is freed would leave
    its runs ``running`` for good. While the disk is still full nothing changes, and
    the next tick finds them again."""
    try:
        with db.engine.begin() as conn:
            requeued = [w for w in workflow_ids if executors.requeue_errored(conn, w, INTENT_QUEUE)]
    except Exception as exc:
        if not storage_full(exc):
            raise
        return []
    if requeued:
        _log.warning("re-queued %d run(s) a full disk had ended in DBOS", len(requeued))
        _tell_workers()
    return requeued


def due(conn: Conn, app_version: str) -> Pass | None:
    """What the leader's pass would do now, read in the tick's own transaction (four
    reads on indexes, the last over the queue's unfinished entries only, so an idle
    worker's tick stays one transaction); None: nothing. The checkpoints of finished
    workflows are dropped in the same transaction (``checkpoints.drop_finished``:
    a workflow's steps leave them for the heartbeat, not a transaction of their own)."""
    checkpoints.drop_finished(conn)
    stopped = cancels.stopped(conn)
    errored = executors.errored_on_full_disk(conn, app_version)
    expired = stretches.expired(conn)
    unkeyed = executors.unkeyed(conn, INTENT_QUEUE)
    if not (stopped or errored or expired or unkeyed):
        return None

    def run(rt: Runtime) -> list[str]:
        # Runs whose workflow DBOS will not run further (cancelled through DBOS, ended
        # in an error, lost) cannot end themselves, nor can runs a full disk ended in
        # DBOS whose worker died meanwhile, nor parked runs whose wait is over; work an
        # older release queued (no partition key) is never claimed from the
        # partitioned queue until it has one.
        if unkeyed:
            with rt.db.engine.begin() as c:
                executors.key_unkeyed(c, INTENT_QUEUE, LEGACY_PARTITION)
                work_queue.notify_work(c, LEGACY_PARTITION)
        ended = end_stopped(rt, stopped) if stopped else []
        requeued = requeue_orphaned(rt.db, errored) if errored else []
        return ended + requeued + (expire_waits(rt, expired) if expired else [])

    return run


def look_for_work(conn: Conn) -> None:
    """In the reaper's tick, one statement: work waiting on the intent queue has this
    worker's claimer look at every partition (``worker.durable._wake``), and work on
    DBOS's internal queue or a DBOS timer due has it run DBOS's own chores. Work
    nobody was told of (or told while this worker was full) is found within a
    heartbeat, and an idle worker pays one statement for it, not a claim pass and
    DBOS's background jobs every second."""
    queues = (INTENT_QUEUE, DBOS_INTERNAL_QUEUE)
    seen = executors.waiting(conn, queues, time.time_ns() // 1_000_000, dbos_application())
    if INTENT_QUEUE in seen.queues:
        look_again()
    if DBOS_INTERNAL_QUEUE in seen.queues or seen.timers:
        dbos_work_due()


UPKEEP = Upkeep(
    resume_stranded=resume_stranded,
    due=due,
    hand_over=hand_over,
    pending=pending,
    look_for_work=look_for_work,
)
