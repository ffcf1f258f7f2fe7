"""The opencode handler: one turn of the *build* agent in the run's session.

The step's input is ``{"prompt": str, "subgoals": [str, ...]?}``. The turn
runs in the run's workspace under the profile's executor policy (permission
answers, stall and turn limits); ``worker.opencode.turn`` does the watching.
On the timeout ladder's second rung (``narrowed`` in the envelope) the prompt is cut down
to its first sub-goal and the turn gets the policy's narrowed timeout. The envelope's
``allowance`` is what is left of the run's budgets: a turn that spends past it is cut
short (aborted, reverted, its workspace restored) with ``budget_exceeded``.

The OpenCode server runs in the worker's sandbox (``worker/sandbox/server.py``),
recorded in the output as ``sandbox``. On a worker that cannot make one the step
is refused (``sandbox_unavailable``) unless the profile says
``unsandboxed_opencode: allowed``.
"""

from __future__ import annotations

from pydantic import Field, ValidationError

from contracts import Closed, ErrorCode, GatehouseError, OpencodePolicy
from contracts.execution import ExecutionEnvelope, ExecutionResult
from worker.handlers._base import (
    HandlerContext,
    HandlerResult,
    answer,
    describe_invalid,
    limits_of,
)
from worker.handlers.opencode.runner import narrow, noted, sandbox_refusal, server_of, turn_spec
from worker.handlers.opencode.turn import TurnSpec, reconcile, run_turn

__all__ = ["OpencodeInput", "reconcile_turn", "run"]


class OpencodeInput(Closed):
    prompt: str = Field(min_length=1, max_length=20_000)
    subgoals: list[str] = Field(default_factory=list, max_length=20)


def _spec(envelope: ExecutionEnvelope, context: HandlerContext) -> TurnSpec:
    ext = envelope.gatehouse
    try:
        parsed = OpencodeInput.model_validate(envelope.arguments)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID, f"opencode step input: {describe_invalid(exc)}"
        ) from exc
    limits = limits_of(envelope)
    policy = ext.executor_policy or OpencodePolicy()
    prompt, timeout_s = parsed.prompt, min(limits.timeout_s, policy.turn_timeout_s)
    if ext.narrowed:
        prompt, timeout_s = narrow(parsed.prompt, parsed.subgoals), policy.narrowed_timeout_s
    return turn_spec(
        context.settings,
        run_id=envelope.context.session_id,
        step_id=envelope.task_id,
        op_key=ext.op_key,
        agent="build",
        prompt=prompt,
        schema=None,
        policy=policy,
        timeout_s=timeout_s,
        max_output_bytes=limits.max_output_bytes,
        allowance=ext.allowance,
        cancelled_by=context.cancelled_by,
    )


def _refusal(envelope: ExecutionEnvelope) -> GatehouseError | None:
    return sandbox_refusal(envelope.gatehouse.unsandboxed_opencode == "allowed")


def run(envelope: ExecutionEnvelope, context: HandlerContext) -> ExecutionResult:
    refused = _refusal(envelope)
    if refused is not None:
        return answer(
            envelope,
            HandlerResult(
                ok=False,
                output=refused.details,
                error_code=refused.code,
                error_message=refused.message,
            ),
        )
    spec = _spec(envelope, context)
    server = server_of(context.settings)
    result = noted(run_turn(server, spec))
    if envelope.gatehouse.narrowed:
        result.output["narrowed_prompt"] = spec.prompt
    return answer(envelope, result)


def reconcile_turn(envelope: ExecutionEnvelope, context: HandlerContext) -> ExecutionResult | None:
    """Settle a turn a crash cut off (see ``worker.opencode.turn.reconcile``); where
    OpenCode may not run now, None: the call is made again, and refused."""
    if _refusal(envelope) is not None:
        return None
    settled = reconcile(server_of(context.settings), _spec(envelope, context))
    return None if settled is None else answer(envelope, noted(settled))
