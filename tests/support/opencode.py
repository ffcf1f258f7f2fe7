"""Helpers for tests that drive a real OpenCode with the scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contracts import GatehouseError, JsonObject, Plan, digest_of
from tests.support.stack import Stack, running_stack
from worker.handlers.opencode.pin import SETUP_TASK, OpencodePin, installed_pin
from worker.runtime import WorkerSettings
from worker.scripted_model import ScriptedModel

__all__ = [
    "approved_plan_run",
    "edit_then_note",
    "first_prompts",
    "opencode_stack",
    "opencode_stack_for",
    "require_opencode",
    "write_call",
]


def require_opencode() -> OpencodePin:
    """The pin of the installed OpenCode; the test is skipped, with the reason, without one."""
    try:
        return installed_pin(WorkerSettings.from_env({}).opencode_dir)
    except GatehouseError as exc:
        pytest.skip(f"OpenCode is not installed (run: {SETUP_TASK}): {exc.message}")


def write_call(name: str, content: str) -> dict[str, Any]:
    """A scripted reply in which the model calls OpenCode's ``write`` tool."""
    return {"tool_calls": [{"name": "write", "arguments": {"filePath": name, "content": content}}]}


def first_prompts(model: ScriptedModel, marker: str) -> int:
    """Chat requests that open a turn with this marker: how often the model was *sent* it."""
    count = 0
    for body in model.chat_requests():
        raw: Any = body.get("messages")
        messages = [m for m in raw or [] if isinstance(m, dict)]
        if messages and messages[-1].get("role") == "user" and marker in str(messages[-1]):
            count += 1
    return count


@contextmanager
def opencode_stack(
    backend: str,
    tmp: Path,
    script: JsonObject,
    *,
    planner: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """A running stack whose OpenCode talks to a scripted model playing ``script``
    (and the model planner too, with ``planner``); ``env`` is given to the worker
    and the shim alike. The OpenCode server is stopped when the stack goes."""
    from worker.handlers.opencode.supervisor import stop_running_server
    from worker.scripted_model import load_script

    with (
        ScriptedModel(load_script(script)) as model,
        running_stack(
            backend,
            tmp,
            {
                "GATEHOUSE_OPENCODE_MODEL_URL": model.base_url,
                "GATEHOUSE_OPENCODE_MODEL": "scripted",
                "GATEHOUSE_OPENCODE_STATE": str(tmp / "opencode"),
                **(
                    {"GATEHOUSE_MODEL_BASE_URL": model.base_url, "GATEHOUSE_MODEL_NAME": "scripted"}
                    if planner
                    else {}
                ),
                **(env or {}),
            },
            shim_env=env,
        ) as stack,
    ):
        try:
            yield stack
        finally:
            stop_running_server()


def opencode_stack_for(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    script: JsonObject,
    *,
    planner: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """The body of a module fixture parametrized over the backends: skipped, with the
    reason, where the backend or OpenCode is missing."""
    from tests.conftest import require_backend

    backend: str = request.param
    require_backend(backend)
    require_opencode()
    tmp = tmp_path_factory.mktemp(f"oc-{backend}")
    with opencode_stack(backend, tmp, script, planner=planner, env=env) as stack:
        yield stack


def approved_plan_run(stack: Stack, plan: JsonObject, profile: str, **extra: Any) -> str:
    """Submit ``plan`` as a run-plan intent, wait for its plan card, approve it: the run id."""
    r = stack.submit(
        {
            "recipe": "echo",
            "objective": plan["objective"],
            "mode": "run-plan",
            "plan": plan,
            "policy_profile": profile,
            **extra,
        }
    )
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    assert stack.wait(run_id, {"waiting_approval", "failed"})["status"] == "waiting_approval"
    approved = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert approved.status_code == 200, approved.text
    return run_id


def edit_then_note(objective: str, prompt: str, **edit: Any) -> JsonObject:
    """A plan: one OpenCode ``edit`` step (``edit`` adds to it), then a noop ``after``
    that a run cut short in the edit must never reach."""
    return {
        "objective": objective,
        "steps": [
            {
                "step_id": "edit",
                "verb": "edit",
                "connector_id": "workspace-opencode",
                "driver_kind": "opencode",
                "input": {"prompt": prompt},
                **edit,
            },
            {
                "step_id": "after",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input": {"message": "must not run"},
            },
        ],
    }
