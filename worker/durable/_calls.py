"""The calls a workflow makes, each one DBOS step under its durable name.

Every step body goes through the op_key ledger (``worker.calls``), so re-running
one after a crash before its checkpoint is safe: the ledger answers for any
call that already happened. Each retries a lost database connection (up to 6
attempts, backoff from 0.5 s).
"""

from __future__ import annotations

from collections.abc import Callable

from dbos import DBOS

from contracts import GatehouseError, JsonObject, Step
from worker.calls import PlannerCall, ToolCall, prepare_planner, prepare_tool, through_ledger
from worker.durable._tx import retried
from worker.explain import explain_run
from worker.opa import pack_output
from worker.replay import replay_run
from worker.runtime import runtime

__all__ = ["explain_call", "opa_pack", "planner_call", "replay_call", "tool_call"]


def _step(name: str, body: Callable[[JsonObject], JsonObject], arg: JsonObject) -> JsonObject:
    return DBOS.run_step(retried(name), body, arg)


def _planner(raw: JsonObject) -> JsonObject:
    spec = PlannerCall.model_validate(raw)
    return prepare_planner(spec, runtime().settings).answer(through_ledger)


def planner_call(raw: JsonObject) -> JsonObject:
    """A run's compile or repair call (``worker.calls.PlannerCall`` as JSON)."""
    return _step(Step.PLANNER_CALL, _planner, raw)


def _tool(raw: JsonObject) -> JsonObject:
    spec = ToolCall.model_validate(raw)
    return prepare_tool(spec, runtime().settings).answer(through_ledger)


def tool_call(raw: JsonObject) -> JsonObject:
    """One attempt of a plan step's tool call (``worker.calls.ToolCall`` as JSON)."""
    return _step(Step.TOOL_CALL, _tool, raw)


def _explain(job: JsonObject) -> JsonObject:
    rt = runtime()
    try:
        view = explain_run(rt.db, rt.settings, str(job.get("run_id")))
    except GatehouseError as exc:
        return {"error": exc.to_json()}
    return {"explain": view.model_dump(mode="json")}


def explain_call(run_id: str) -> JsonObject:
    """``{explain}`` (an ``ExplainView``) or ``{error}``."""
    return _step(Step.EXPLAIN_CALL, _explain, {"run_id": run_id})


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
