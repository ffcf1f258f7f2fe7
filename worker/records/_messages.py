"""An interactive run between turns: waiting for its next message, and taking it."""

from __future__ import annotations

from contracts import JsonObject, RunStatus
from ledger import Conn, cancels, messages, runs, stretches
from worker.records._decisions import SUPERSEDED, stale, wait_deadline
from worker.runtime import WorkerSettings

__all__ = ["message_or_park", "read_message", "took_message", "wait_for_input"]


def wait_for_input(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """The run's plan is done; it waits for its session's next message."""
    runs.set_status(s, str(arg["run_id"]), RunStatus.WAITING_INPUT, "input")
    return {}


def read_message(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """``{message}``: the ``run_messages`` row of this turn is the authority; a wake-up
    only hurries."""
    found = messages.get(s, str(arg["run_id"]), int(str(arg["turn"])))
    return {"message": None if found is None else found.as_json()}


def took_message(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    runs.set_status(s, str(arg["run_id"]), RunStatus.RUNNING, "compile")
    return {}


def message_or_park(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """A split interactive run between turns, in one commit with the run's row
    locked: ``{message}`` once this turn's message is on record (the run goes
    on); None with ``cancelled`` or ``expired`` when a cancel came or the wait is
    over (the session ends); else the run parked at ``wait`` (``parked``)."""
    run_id, turn = str(arg["run_id"]), int(str(arg["turn"]))
    if stale(s, arg):
        return dict(SUPERSEDED)
    found = messages.get(s, run_id, turn)
    if found is not None:
        stretches.answered(s, run_id)
        took_message(s, arg, me)
        return {"message": found.as_json()}
    if cancels.get(s, run_id) is not None:
        stretches.answered(s, run_id)
        return {"message": None, "cancelled": True}
    deadline = wait_deadline(arg)
    if stretches.deadline_passed(deadline):
        stretches.answered(s, run_id)
        return {"message": None, "expired": True}
    wait_for_input(s, arg, me)
    at = f"@input-{turn}"
    stretches.park(
        s, run_id, wait=int(str(arg["wait"])), at=at, deadline=deadline, version=me.app_version
    )
    return {"message": None, "parked": True}
