"""The opencode planner: compile in the run's OpenCode session with the *plan* agent.

The plan agent may read the workspace but not edit it (OpenCode's plan mode,
and the profile's permission answers), and must answer through structured
output in the plan contract's JSON schema (``format: json_schema``). What it
returns is only a proposal: the gate checks it like any other plan. Like
opencode steps, it is refused (``sandbox_unavailable``) on a worker that cannot
sandbox OpenCode unless the profile says ``unsandboxed_opencode: allowed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import ErrorCode, JsonObject, OpencodePolicy, render_schema
from contracts.plan import PLAN_SCHEMA_ID
from worker.handlers import HandlerResult
from worker.handlers.opencode.runner import noted, sandbox_refusal, server_of, turn_spec
from worker.handlers.opencode.turn import TurnSpec, reconcile, run_turn
from worker.planners._openai_compat import PlannerInput, planner_prompt
from worker.runtime import WorkerSettings

__all__ = ["CompileTurn", "compile_request"]

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


def _as_plan(result: HandlerResult) -> HandlerResult:
    structured = result.output.get("structured")
    if result.ok and isinstance(structured, dict):
        return HandlerResult(
            ok=True,
            # the turn's usage beside the plan, where the budgets read a model call's usage
            output={"plan": structured, "usage": result.output.get("usage"), "turn": result.output},
            artifacts=result.artifacts,
        )
    code = result.error_code if not result.ok else ErrorCode.PLANNER_FAILED
    if code in (ErrorCode.HANDLER_FAILED, None):
        code = ErrorCode.PLANNER_FAILED
    return HandlerResult(
        ok=False,
        output={"turn": result.output, "usage": result.output.get("usage")},
        error_code=code,
        error_message=result.error_message
        or "the plan agent gave no structured output in the plan schema",
        artifacts=result.artifacts,
    )


@dataclass(frozen=True)
class CompileTurn:
    """The compile of one run: a turn of the plan agent, run or reconciled by op_key."""

    settings: WorkerSettings
    run_id: str
    step_id: str
    request: JsonObject  # from compile_request
    policy: OpencodePolicy
    unsandboxed: bool = False  # the profile allows it without a sandbox

    def spec(self, key: str) -> TurnSpec:
        return turn_spec(
            self.settings,
            run_id=self.run_id,
            step_id=self.step_id,
            op_key=key,
            agent="plan",
            prompt=str(self.request["prompt"]),
            schema=render_schema(PLAN_SCHEMA_ID),
            policy=self.policy,
            timeout_s=self.policy.turn_timeout_s,
            max_output_bytes=_MAX_OUTPUT_BYTES,
        )

    def run(self, key: str) -> HandlerResult:
        refused = sandbox_refusal(self.unsandboxed)
        if refused is not None:
            raise refused
        return _as_plan(noted(run_turn(server_of(self.settings), self.spec(key))))

    def reconcile(self, key: str) -> HandlerResult | None:
        if sandbox_refusal(self.unsandboxed) is not None:
            return None  # made again, and refused
        settled = reconcile(server_of(self.settings), self.spec(key))
        return None if settled is None else _as_plan(noted(settled))
