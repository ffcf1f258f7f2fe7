"""An interactive run between turns: waiting for its next message, and taking it."""

from __future__ import annotations

from contracts import JsonObject, RunStatus
from ledger import Conn, messages, runs
from worker.runtime import WorkerSettings

__all__ = ["read_message", "took_message", "wait_for_input"]


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
