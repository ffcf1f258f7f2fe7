"""The calls a workflow makes.

A planner or tool call runs in the workflow's body, through the op_key ledger
(``worker.calls``): the ledger is its checkpoint, so no DBOS step wraps it. A
workflow DBOS re-executes after a crash runs the code again and the ledger
answers every call already made (a finished one from its row; one cut off
mid-flight is re-sent under its key, reconciled or reported in doubt). The
ledger's transactions wait out a lost database themselves; anything else
that finds it away tries the whole call again (``steady``). A workflow DBOS
holds cancelled (``dbos workflow cancel``) makes no call: the claim's
transaction asks, as a DBOS step's start would.

An explain call, an OPA pack and a replay are DBOS steps under their durable
names; explain's retries a lost database connection (up to 6 attempts,
backoff from 0.5 s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dbos import DBOS
from sqlalchemy.engine import Connection

from contracts import GatehouseError, JsonObject, Step
from ledger.calls import Look
from worker.calls import (
    Call,
    Performed,
    PlannerCall,
    ToolCall,
    outcome_of,
    prepare_planner,
    prepare_tool,
    through_ledger,
)
from worker.durable._dbos import raise_cancelled
from worker.durable._tx import retried, steadily, steady
from worker.explain import explain_run
from worker.flow import CallOutcome
from worker.opa import pack_output
from worker.replay import replay_run
from worker.runtime import runtime

__all__ = ["explain_call", "opa_pack", "planner_call", "replay_call", "tool_call"]


def planner_call(spec: PlannerCall) -> JsonObject:
    """A run's compile, repair or next turn, as the flow's planner port asks it."""
    return steady(lambda: prepare_planner(spec, runtime().settings).answer(_in_workflow))


def _in_workflow(call: Call, perform: Callable[[str], Performed]) -> JsonObject:
    return through_ledger(_stops_if_cancelled(call), perform)


def tool_call(spec: ToolCall) -> CallOutcome:
    """One attempt of a plan step's tool call, as the flow's tool port asks it.

    Its path to the claim's INSERT is short on purpose (docs/architecture.md): the
    flow's port is this function, which calls ``through_ledger``, which claims; the
    attempts after a lost database run in this frame."""
    for attempt in steadily():
        with attempt:
            prepared = prepare_tool(spec, runtime().settings)
            if prepared.call is None or prepared.perform is None:
                return CallOutcome(prepared.refused or {})
            answer = through_ledger(_stops_if_cancelled(prepared.call), prepared.perform)
            return outcome_of(answer)
    raise AssertionError("unreachable")  # pragma: no cover - the attempts end in a return


def _stops_if_cancelled(call: Call) -> Call:
    """``call``, its claim first asking what a DBOS step's start asks: whether DBOS
    holds the workflow cancelled (then nothing is claimed or sent). The claim's one
    read answers it (``calls.Look.workflow_cancelled``)."""
    workflow_id = DBOS.workflow_id
    if not workflow_id:
        return call
    boundary = call.boundary

    def stops(conn: Connection, looked: Look) -> JsonObject | None:
        if looked.workflow_cancelled:
            raise_cancelled(workflow_id)
        return None if boundary is None else boundary(conn, looked)

    return replace(call, boundary=stops, workflow_id=workflow_id)


def _explain(job: JsonObject) -> JsonObject:
    rt = runtime()
    try:
        view = explain_run(rt.db, rt.settings, str(job.get("run_id")))
    except GatehouseError as exc:
        return {"error": exc.to_json()}
    return {"explain": view.model_dump(mode="json")}


def explain_call(run_id: str) -> JsonObject:
    """``{explain}`` (an ``ExplainView``) or ``{error}``."""
    return DBOS.run_step(retried(Step.EXPLAIN_CALL), _explain, {"run_id": run_id})


def opa_pack(raw: JsonObject) -> JsonObject:
    """Pack an OPA run's output archive (``worker.opa.pack_output``)."""
    return DBOS.run_step(
        {"name": Step.OPA_PACK, "retries_allowed": True, "max_attempts": 4}, pack_output, raw
    )


def _replay(job: JsonObject) -> JsonObject:
    rt = runtime()
    run_id = str(job.get("run_id"))
    try:
        if job.get("rules") == "current":
            report = replay_run(rt.db, rt.settings, run_id, "current")
        else:
            report = replay_run(rt.db, rt.settings, run_id, "recorded")
    except GatehouseError as exc:
        return {"error": exc.to_json()}
    return {"report": report.model_dump(mode="json")}


def replay_call(run_id: str, rules: str) -> JsonObject:
    """``{report}`` (a ``ReplayReport``) or ``{error}``."""
    return DBOS.run_step({"name": Step.REPLAY_RUN}, _replay, {"run_id": run_id, "rules": rules})
