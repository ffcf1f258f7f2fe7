"""Where the opencode handler and planner meet the worker: server, paths, turn specs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from contracts import ErrorCode, GatehouseError, JsonObject, OpencodePolicy
from contracts.execution import TurnAllowance
from worker.handlers import HandlerResult, nobody
from worker.handlers.opencode.supervisor import OpencodeServer, ServerSpec, running_server
from worker.handlers.opencode.turn import TurnSpec
from worker.runtime import WorkerSettings
from worker.sandbox.server import server_sandbox

__all__ = ["narrow", "noted", "sandbox_refusal", "server_of", "turn_spec"]


def sandbox_refusal(allowed: bool) -> GatehouseError | None:
    """None when OpenCode may be driven on this worker: its server runs in the
    sandbox, or the profile allows it without one (``allowed``); else the
    ``sandbox_unavailable`` refusal, with the reason in its details."""
    found = server_sandbox()
    if not isinstance(found, str) or allowed:
        return None
    return GatehouseError(
        ErrorCode.SANDBOX_UNAVAILABLE,
        f"not run: OpenCode cannot be sandboxed here ({found})",
        details={"sandbox": {"tool": "none", "reason": found}},
    )


def noted(result: HandlerResult) -> HandlerResult:
    """A turn's result whose server ran unsandboxed says the profile allowed it."""
    sandbox = result.output.get("sandbox")
    if isinstance(sandbox, dict) and sandbox.get("tool") == "none":
        sandbox["allowed_by"] = "profile"
    return result


def server_of(settings: WorkerSettings) -> OpencodeServer:
    """This worker's OpenCode server, started (or restarted) as needed."""
    if settings.opencode_model_url is None:
        raise GatehouseError(
            ErrorCode.EXECUTOR_UNAVAILABLE,
            "opencode steps need a model: set GATEHOUSE_OPENCODE_MODEL_URL"
            " (or GATEHOUSE_MODEL_BASE_URL)",
        )
    safe_id = re.sub(r"[^A-Za-z0-9._-]", "_", settings.executor_id)
    return running_server(
        ServerSpec(
            opencode_dir=settings.opencode_dir,
            home=settings.opencode_state / safe_id,
            workspace_root=settings.workspace_root,
            model_url=settings.opencode_model_url,
            model=settings.opencode_model,
            api_key=settings.model_api_key,
        )
    )


def narrow(prompt: str, subgoals: list[str]) -> str:
    """The timeout ladder's narrowed prompt: the first sub-goal only.

    The step's own ``subgoals`` when it lists them, else the prompt's first
    line or sentence.
    """
    if subgoals:
        first = subgoals[0]
    else:
        line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), prompt.strip())
        first = re.split(r"(?<=[.!?])\s+", line, maxsplit=1)[0]
    return (
        "The previous attempt at this step ran out of time and was undone. Do only this first"
        f" part of it, nothing more, then stop:\n{first}"
    )


def turn_spec(
    settings: WorkerSettings,
    *,
    run_id: str,
    step_id: str,
    op_key: str,
    agent: Literal["plan", "build"],
    prompt: str,
    schema: JsonObject | None,
    policy: OpencodePolicy,
    timeout_s: float,
    max_output_bytes: int,
    allowance: TurnAllowance | None = None,
    cancelled_by: Callable[[str], str | None] = nobody,
) -> TurnSpec:
    workspace: Path = settings.workspace_root / run_id
    workspace.mkdir(parents=True, exist_ok=True)
    return TurnSpec(
        run_id=run_id,
        step_id=step_id,
        op_key=op_key,
        workspace=workspace,
        snapshot_path=settings.snapshot_root / run_id / f"{op_key}.json",
        agent=agent,
        prompt=prompt,
        schema=schema,
        policy=policy,
        timeout_s=timeout_s,
        model=settings.opencode_model,
        max_output_bytes=max_output_bytes,
        crash_point=settings.crash_point,
        allowance=allowance,
        cancelled_by=cancelled_by,
    )
