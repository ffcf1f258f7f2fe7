"""The opencode handler: one turn of the *build* agent in the run's session.

The step's input is ``{"prompt": str, "subgoals": [str, ...]?}``. The turn
runs in the run's workspace under the profile's executor policy (permission
answers, stall and turn limits); ``worker.opencode.turn`` does the watching.
On the timeout ladder's second rung (``ctx.narrowed``) the prompt is cut down
to its first sub-goal and the turn gets the policy's narrowed timeout.
"""

from __future__ import annotations

from pydantic import Field, ValidationError

from contracts import ErrorCode, GatehouseError, JsonObject, OpencodePolicy
from contracts._base import Closed
from worker._runtime import runtime
from worker.handlers._base import HandlerContext, HandlerResult, describe_invalid, limits_of
from worker.opencode.runner import narrow, server_of, turn_spec
from worker.opencode.turn import TurnSpec, reconcile, run_turn

__all__ = ["OpencodeInput", "reconcile_turn", "run"]


class OpencodeInput(Closed):
    prompt: str = Field(min_length=1, max_length=20_000)
    subgoals: list[str] = Field(default_factory=list, max_length=20)


def _spec(ctx: HandlerContext, step_input: JsonObject) -> TurnSpec:
    try:
        parsed = OpencodeInput.model_validate(step_input)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID, f"opencode step input: {describe_invalid(exc)}"
        ) from exc
    limits = limits_of(ctx)
    policy = ctx.executor_policy or OpencodePolicy()
    prompt, timeout_s = parsed.prompt, min(limits.timeout_s, policy.turn_timeout_s)
    if ctx.narrowed:
        prompt, timeout_s = narrow(parsed.prompt, parsed.subgoals), policy.narrowed_timeout_s
    return turn_spec(
        runtime().settings,
        run_id=ctx.run_id,
        step_id=ctx.step_id,
        op_key=ctx.op_key,
        agent="build",
        prompt=prompt,
        schema=None,
        policy=policy,
        timeout_s=timeout_s,
        max_output_bytes=limits.max_output_bytes,
    )


def run(ctx: HandlerContext, step_input: JsonObject) -> HandlerResult:
    spec = _spec(ctx, step_input)
    server = server_of(runtime().settings)
    result = run_turn(server, spec)
    if ctx.narrowed:
        result.output["narrowed_prompt"] = spec.prompt
    return result


def reconcile_turn(ctx: HandlerContext, step_input: JsonObject) -> HandlerResult | None:
    """Settle a turn a crash cut off (see ``worker.opencode.turn.reconcile``)."""
    return reconcile(server_of(runtime().settings), _spec(ctx, step_input))
