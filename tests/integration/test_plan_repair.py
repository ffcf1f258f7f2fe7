"""Plan repair with a scripted model planner, on SQLite and PostgreSQL.

* A compiled plan the gate refuses gets exactly one repair call, told why
  (``model_instruction``); a repaired plan that passes goes on to approval.
* A repaired plan that still fails is refused for good, with a security episode.
* A step that soft-fails with ``on_error: repair`` asks for a repaired
  remainder: a new plan digest, a new approval (the old digest is stale),
  the changes shown on the plan card, and the run goes on with the new steps.

The model plays its turns in order, so the tests run in file order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import require_backend
from tests.support.scripted_model import ScriptedModel
from tests.support.stack import BACKENDS, Stack, running_stack


def _step(step_id: str, **fields: Any) -> dict[str, Any]:
    base = {"step_id": step_id, "verb": "note", "connector_id": "note", "driver_kind": "noop"}
    return {**base, "input": {"text": step_id}, **fields}


def _shell(step_id: str, *argv: str, on_error: str = "fatal") -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": list(argv)},
        "on_error": on_error,
    }


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"schema_id": "env.mova_agent_plan_v1", "objective": "repair me", "steps": list(steps)}


UNKNOWN = _plan(_step("hello", connector_id="nope"))
GOOD = _plan(_step("hello"))
FAILING = _plan(_step("hello"), _shell("look", "ls", "missing.txt", on_error="repair"))
REPAIRED = _plan(_step("hello"), _shell("say", "echo", "found another way"))

# Each test plays its own sequence of planner answers (ScriptedModel.play_turns).
REFUSED_THEN_REPAIRED = [{"content": UNKNOWN}, {"content": GOOD}]
REFUSED_TWICE = [{"content": UNKNOWN}, {"content": UNKNOWN}]
FAILS_THEN_REPAIRED = [{"content": FAILING}, {"content": REPAIRED}]


@pytest.fixture(scope="module", params=BACKENDS)
def repair_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, ScriptedModel]]:
    require_backend(request.param)
    with (
        ScriptedModel(REFUSED_THEN_REPAIRED) as model,
        running_stack(
            request.param,
            tmp_path_factory.mktemp("repair"),
            {"GATEHOUSE_MODEL_BASE_URL": model.base_url, "GATEHOUSE_MODEL_NAME": "scripted"},
        ) as stack,
    ):
        yield stack, model


def _submit(stack: Stack) -> str:
    r = stack.submit({"recipe": "model-plan", "objective": "repair me", "mode": "full-cycle"})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def _calls(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    return calls


def _user_text(request_body: Any) -> str:
    messages = request_body["messages"]
    return "\n".join(m["content"] for m in messages if m["role"] == "user")


def test_a_refused_plan_gets_one_repair_call(repair_stack: tuple[Stack, ScriptedModel]) -> None:
    stack, model = repair_stack
    model.play_turns(REFUSED_THEN_REPAIRED)
    run_id = _submit(stack)
    view = stack.wait(run_id, {"waiting_approval", "failed"})
    assert view["status"] == "waiting_approval", view
    card = view["plan_card"]
    assert card["plan"]["steps"][0]["connector_id"] == "note"
    assert card["revision"] == 1
    assert [c["step_id"] for c in _calls(stack, run_id)] == ["@compile", "@repair"]
    asked = _user_text(model.requests[-1].body)
    assert "unknown_connector" in asked and "Repair" in asked
    plan_episodes = [
        e
        for e in stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
        if e["episode_type"] == "plan/agent_plan"
    ]
    assert plan_episodes[0]["body"]["result_details"]["repaired"] is True
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": card["plan_digest"]})
    assert r.status_code == 200, r.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"


def test_a_plan_still_invalid_after_its_repair_is_refused(
    repair_stack: tuple[Stack, ScriptedModel],
) -> None:
    stack, model = repair_stack
    model.play_turns(REFUSED_TWICE)
    run_id = _submit(stack)
    view = stack.wait(run_id, {"waiting_approval", "failed"})
    assert view["status"] == "failed", view
    assert view["error_code"] == "unknown_connector"
    assert [c["step_id"] for c in _calls(stack, run_id)] == ["@compile", "@repair"]
    events = stack.client.get("/security-events", headers=stack.auth("olga")).json()
    mine = [
        e
        for e in events["security_events"]
        if e["result_details"].get("run_id") == run_id
        and e["episode_type"] == "security_event/unknown_connector"
    ]
    assert mine and mine[0]["result_details"]["phase"] == "repair", mine


def test_a_soft_failure_is_repaired_and_needs_a_new_approval(
    repair_stack: tuple[Stack, ScriptedModel],
) -> None:
    stack, model = repair_stack
    model.play_turns(FAILS_THEN_REPAIRED)
    run_id = _submit(stack)
    first = stack.wait(run_id, {"waiting_approval", "failed"})["plan_card"]
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": first["plan_digest"]})
    assert r.status_code == 200, r.text

    # "look" fails (ls of a missing file); the planner is asked for a remainder,
    # and the run waits again, for the repaired plan's own approval
    deadline = time.monotonic() + 60
    view = stack.run(run_id)
    while (view.get("plan_card") or {}).get("revision") != 2 and time.monotonic() < deadline:
        assert view["status"] not in {"failed", "succeeded"}, view
        time.sleep(0.1)
        view = stack.run(run_id)
    assert view["status"] == "waiting_approval", view
    card = view["plan_card"]
    assert card["previous_digest"] == first["plan_digest"]
    assert card["plan_digest"] != first["plan_digest"]
    changes = {(c["change"], c["step_id"]) for c in card["changes"]}
    assert changes == {("added", "say"), ("removed", "look")}
    asked = _user_text(model.requests[-1].body)
    assert "step_failed" in asked and "look" in asked
    # the approver's page says what changed since the approved revision
    browser = TestClient(stack.client.app, follow_redirects=False)
    browser.post("/dashboard/login", data={"token": stack.client.people.tokens["bob"]})
    page = browser.get(f"/dashboard/runs/{run_id}").text
    assert "Changed since revision 1" in page and first["plan_digest"][:12] in page
    assert "<td>added</td><td>say</td>" in page and "<td>removed</td><td>look</td>" in page

    # the earlier approval does not carry over; its digest is stale now
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": first["plan_digest"]})
    assert r.status_code == 409 and r.json()["error"]["code"] == "stale_plan_digest", r.text
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": card["plan_digest"]})
    assert r.status_code == 200, r.text

    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    assert [(s["step_id"], s["status"]) for s in done["steps"]] == [
        ("hello", "succeeded"),
        ("look", "failed"),
        ("say", "succeeded"),
    ]
    assert [c["step_id"] for c in _calls(stack, run_id)] == [
        "@compile",
        "hello",
        "look",
        "@repair-1",
        "say",
    ]
