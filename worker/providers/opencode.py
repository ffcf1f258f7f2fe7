"""The opencode planner: compile in the run's OpenCode session with the *plan* agent.

The plan agent may read the workspace but not edit it (OpenCode's plan mode,
and the profile's permission answers), and must answer through structured
output in the plan contract's JSON schema (``format: json_schema``). What it
returns is only a proposal: the gate checks it like any other plan.
"""

from __future__ import annotations

from contracts import ErrorCode, JsonObject, OpencodePolicy
from contracts._schemas import render_schema
from contracts.plan import PLAN_SCHEMA_ID
from worker.handlers._base import HandlerResult
from worker.opencode.runner import server_of, turn_spec
from worker.opencode.turn import TurnSpec, reconcile, run_turn
from worker.providers.openai_compat import PlannerInput, planner_prompt
from worker.settings import WorkerSettings

__all__ = ["compile_request", "plan_turn", "reconcile_plan"]

_MAX_OUTPUT_BYTES = 1024 * 1024


def compile_request(planner_input: PlannerInput) -> JsonObject:
    """What the compile turn sends: deterministic, so its digest can be ledgered."""
    system, user = planner_prompt(planner_input)
    return {
        "planner": "opencode",
        "agent": "plan",
        "prompt": f"{system}\n\n{user}",
        "format": {"type": "json_schema", "schema_id": PLAN_SCHEMA_ID},
    }


def _spec(
    settings: WorkerSettings,
    *,
    run_id: str,
    step_id: str,
    key: str,
    request: JsonObject,
    policy: OpencodePolicy,
) -> TurnSpec:
    return turn_spec(
        settings,
        run_id=run_id,
        step_id=step_id,
        op_key=key,
        agent="plan",
        prompt=str(request["prompt"]),
        schema=render_schema(PLAN_SCHEMA_ID),
        policy=policy,
        timeout_s=policy.turn_timeout_s,
        max_output_bytes=_MAX_OUTPUT_BYTES,
    )


def _as_plan(result: HandlerResult) -> HandlerResult:
    structured = result.output.get("structured")
    if result.ok and isinstance(structured, dict):
        return HandlerResult(
            ok=True, output={"plan": structured, "turn": result.output}, artifacts=result.artifacts
        )
    code = result.error_code if not result.ok else ErrorCode.PLANNER_FAILED
    if code in (ErrorCode.HANDLER_FAILED, None):
        code = ErrorCode.PLANNER_FAILED
    return HandlerResult(
        ok=False,
        output={"turn": result.output},
        error_code=code,
        error_message=result.error_message
        or "the plan agent gave no structured output in the plan schema",
        artifacts=result.artifacts,
    )


def plan_turn(
    settings: WorkerSettings,
    *,
    run_id: str,
    step_id: str,
    key: str,
    request: JsonObject,
    policy: OpencodePolicy,
) -> HandlerResult:
    spec = _spec(settings, run_id=run_id, step_id=step_id, key=key, request=request, policy=policy)
    return _as_plan(run_turn(server_of(settings), spec))


def reconcile_plan(
    settings: WorkerSettings,
    *,
    run_id: str,
    step_id: str,
    key: str,
    request: JsonObject,
    policy: OpencodePolicy,
) -> HandlerResult | None:
    spec = _spec(settings, run_id=run_id, step_id=step_id, key=key, request=request, policy=policy)
    settled = reconcile(server_of(settings), spec)
    return None if settled is None else _as_plan(settled)
