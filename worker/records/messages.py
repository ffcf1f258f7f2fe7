"""An interactive run between turns: waiting for its next message, and taking it."""

from __future__ import annotations

from contracts import JsonObject, RunStatus
from ledger import messages, runs
from worker.records._tx import session, tx

__all__ = ["read_message", "took_message", "wait_for_input"]


def _wait(arg: JsonObject) -> JsonObject:
    runs.set_status(session(), str(arg["run_id"]), RunStatus.WAITING_INPUT, "input")
    return {}


def wait_for_input(run_id: str) -> None:
    """The run's plan is done; it waits for its session's next message."""
    tx("gatehouse.wait_for_input", _wait, {"run_id": run_id})


def _read(arg: JsonObject) -> JsonObject:
    found = messages.get(session(), str(arg["run_id"]), int(str(arg["turn"])))
    return {"message": None if found is None else found.as_json()}


def read_message(run_id: str, turn: int) -> JsonObject | None:
    """The ``run_messages`` row of this turn is the authority; a wake-up only hurries."""
    out = tx("gatehouse.read_message", _read, {"run_id": run_id, "turn": turn})
    found = out.get("message")
    return found if isinstance(found, dict) else None


def _took(arg: JsonObject) -> JsonObject:
    runs.set_status(session(), str(arg["run_id"]), RunStatus.RUNNING, "compile")
    return {}


def took_message(run_id: str) -> None:
    tx("gatehouse.took_message", _took, {"run_id": run_id})
