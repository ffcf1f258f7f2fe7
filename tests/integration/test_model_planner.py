"""The OpenAI-compatible planner inside real runs, against a scripted model on loopback.

The model only proposes: its plan is gated like any other, a plan carrying
execution results is refused, a failing model fails the run with its code, and
every compile is one ledger row whose op_key the model received as its
Idempotency-Key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require_backend
from tests.support.scripted_model import ScriptedModel
from tests.support.stack import BACKENDS, Stack, running_stack
from worker.flow import planner_seed


def _plan(step_input: dict[str, Any]) -> dict[str, Any]:
    step = {"step_id": "hello", "verb": "note", "connector_id": "note", "driver_kind": "noop"}
    return {
        "schema_id": "env.mova_agent_plan_v1",
        "objective": "say hello",
        "steps": [{**step, "input": step_input}],
    }


GOOD_PLAN = _plan({"message": "hello"})
SEED = "gatehouse-test-seed"
CLAIMS_RESULTS = _plan({"stdout": "I already ran it"})


@pytest.fixture(scope="module", params=BACKENDS)
def model_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, ScriptedModel]]:
    require_backend(request.param)
    turns: list[Any] = [
        {"content": GOOD_PLAN},
        {"content": CLAIMS_RESULTS},
        {"status": 500, "body": "model overloaded"},
    ]
    with (
        ScriptedModel(turns) as model,
        running_stack(
            request.param,
            tmp_path_factory.mktemp("model"),
            {
                "GATEHOUSE_MODEL_BASE_URL": model.base_url,
                "GATEHOUSE_MODEL_NAME": "scripted",
                "RANDOM_SEED": SEED,
            },
        ) as stack,
    ):
        yield stack, model


def _submit(stack: Stack) -> str:
    r = stack.submit({"recipe": "model-plan", "objective": "say hello", "mode": "full-cycle"})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def test_model_planner_in_runs(model_stack: tuple[Stack, ScriptedModel]) -> None:
    stack, model = model_stack
    # 1: a good plan, gated, approved, run
    run_id = _submit(stack)
    view = stack.wait(run_id, {"waiting_approval", "failed"})
    assert view["status"] == "waiting_approval", view
    assert view["plan_card"]["plan"]["steps"][0]["step_id"] == "hello"
    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": view["plan_card"]["plan_digest"]}
    )
    assert r.status_code == 200
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    calls = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    compile_call = next(c for c in calls if c["step_id"] == "@compile")
    assert compile_call["target"] == "openai_compat" and compile_call["status"] == "completed"
    sent = model.requests[0]
    assert sent.headers["idempotency-key"] == compile_call["op_key"]
    body = sent.body
    assert isinstance(body, dict)
    assert body["max_tokens"] == 4096  # the profile's budget
    # RANDOM_SEED is recorded on the run, and the model is asked to sample from it
    assert view["random_seed"] == SEED
    assert body["seed"] == planner_seed(SEED, run_id)
    fmt = body["response_format"]
    assert isinstance(fmt, dict) and fmt["type"] == "json_schema"

    # 2: the model claims to have executed something: one repair call (which the model
    # fails), then refused at the gate
    run_id = _submit(stack)
    done = stack.wait(run_id, {"failed", "waiting_approval"})
    assert done["status"] == "failed" and done["error_code"] == "plan_contains_results"
    steps = [c["step_id"] for c in stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]]
    assert steps == ["@compile", "@repair"]
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    assert "security_event/plan_contains_results" in [e["episode_type"] for e in episodes]
    ends = [e for e in episodes if e["episode_type"] == "execution/run_summary"]
    assert [e["result_status"] for e in ends] == ["failed"]  # every run ends with its summary

    # 3: the model fails: the run fails with planner_failed, nothing executes
    run_id = _submit(stack)
    done = stack.wait(run_id, {"failed", "waiting_approval"})
    assert done["status"] == "failed" and done["error_code"] == "planner_failed"
    kinds = [c["kind"] for c in stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]]
    assert kinds == ["provider"]
    assert len(model.requests) == 4  # one request per compile or repair, none repeated
