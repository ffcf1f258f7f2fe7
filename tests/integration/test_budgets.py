"""Budgets in real runs: each kind exceeded once, the widening refusal, and a crash.

The scripted model reports the usage its script says (``"usage"``), so tokens
and cost are exact; each test picks its reply by its objective. Every run here
is replayed at teardown (``running_stack``): what was spent is recomputed from
the ledger to the same trace digest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import Plan, digest_of
from shim.local import start_worker, stop
from tests.conftest import require_backend
from tests.support.mova import load_upstream, vendor_errors
from tests.support.stack import (
    BACKENDS,
    Stack,
    running_stack,
    shim_client,
    wait_for_status,
)
from worker.scripted_model import ScriptedModel, load_script


def _noop_plan(objective: str, n: int) -> dict[str, Any]:
    steps = [
        {
            "step_id": f"s{i}",
            "verb": "note",
            "connector_id": "note",
            "driver_kind": "noop",
            "input": {"text": f"step {i}"},
        }
        for i in range(1, n + 1)
    ]
    return {"schema_id": "env.mova_agent_plan_v1", "objective": objective, "steps": steps}


def _opencode_plan() -> dict[str, Any]:
    step = {
        "step_id": "edit",
        "verb": "run",
        "connector_id": "workspace-opencode",
        "driver_kind": "opencode",
        "input": {"prompt": "write hello.txt"},
    }
    return {"schema_id": "env.mova_agent_plan_v1", "objective": "edit", "steps": [step]}


def _reply(plan: dict[str, Any], prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {
        "content": plan,
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        **extra,
    }


SCRIPT: dict[str, Any] = {
    "turns": [
        {"match": "Objective: tokens", "replies": [_reply(_noop_plan("t", 1), 900, 200)]},
        {"match": "Objective: cost", "replies": [_reply(_noop_plan("c", 1), 2000, 1000)]},
        {"match": "Objective: wall", "replies": [_reply(_noop_plan("w", 1), 5, 5, delay_s=1.3)]},
        {"match": "Objective: turns", "replies": [_reply(_opencode_plan(), 10, 10)]},
    ]
}


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    with (
        ScriptedModel(load_script(SCRIPT)) as model,
        running_stack(
            request.param,
            tmp_path_factory.mktemp(f"budgets-{request.param}"),
            {"GATEHOUSE_MODEL_BASE_URL": model.base_url, "GATEHOUSE_MODEL_NAME": "scripted"},
        ) as s,
    ):
        yield s


def _submit(stack: Stack, body: dict[str, Any]) -> str:
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def _model_run(stack: Stack, objective: str, budgets: dict[str, Any], **extra: Any) -> str:
    body = {"recipe": "model-plan", "objective": objective, "budgets": budgets, **extra}
    return _submit(stack, body)


def _approve(stack: Stack, run_id: str, digest: str) -> None:
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert r.status_code == 200, r.text


def _exceeded(stack: Stack, run_id: str, budget: str) -> dict[str, Any]:
    """The run ended budget_exceeded naming ``budget``, with its episode; its view."""
    view = stack.wait(run_id, {"succeeded", "failed"})
    assert view["status"] == "failed", view
    assert view["error_code"] == "budget_exceeded", view
    assert view["error_message"].startswith(f"{budget}: "), view["error_message"]
    assert view["budgets"]["exceeded"] == budget
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    [ep] = [e for e in episodes if e["episode_type"] == "execution/budget_exceeded"]
    assert ep["result_status"] == "failed"
    assert ep["body"]["result_details"]["budget"] == budget
    assert vendor_errors(ep["body"]) == []
    summary = [e for e in episodes if e["episode_type"] == "execution/run_summary"]
    assert [e["result_status"] for e in summary] == ["failed"]
    out: dict[str, Any] = view
    return out


def test_max_steps(stack: Stack) -> None:
    plan = _noop_plan("three notes", 3)
    run_id = _submit(
        stack,
        {
            "recipe": "echo",
            "objective": "steps",
            "mode": "run-plan",
            "plan": plan,
            "budgets": {"max_steps": 2},
        },
    )
    _approve(stack, run_id, digest_of(Plan.model_validate(plan).model_dump(mode="json")))
    view = _exceeded(stack, run_id, "max_steps")
    assert view["error_message"] == "max_steps: 2 used of 2; the next call would cross it"
    assert [(s["step_id"], s["status"]) for s in view["steps"]] == [
        ("s1", "succeeded"),
        ("s2", "succeeded"),
        ("s3", "failed"),
    ]
    assert view["steps"][2]["error_code"] == "budget_exceeded"
    assert view["budgets"]["limits"]["max_steps"] == 2  # narrowed from the profile's 200
    assert view["budgets"]["limits"]["max_tokens"] == 2_000_000
    assert view["budgets"]["used"]["steps"] == 2
    assert view["budgets"]["summary"]["max_steps"] == "2 / 2"
    called = stack.sql("SELECT step_id FROM calls WHERE run_id = :r ORDER BY step_id", r=run_id)
    assert [r[0] for r in called] == ["s1", "s2"]  # s3 was never called


def test_max_tokens(stack: Stack) -> None:
    run_id = _model_run(stack, "tokens", {"max_tokens": 1000})
    view = _exceeded(stack, run_id, "max_tokens")
    assert view["error_message"] == "max_tokens: 1,100 used of 1,000"
    assert view["budgets"]["used"]["prompt_tokens"] == 900
    assert view["budgets"]["used"]["completion_tokens"] == 200
    assert view["plan_card"] is None  # stopped right after the compile


def test_max_cost(stack: Stack) -> None:
    # default profile: the scripted model costs $1 / $4 per million tokens
    run_id = _model_run(stack, "cost", {"max_cost_usd": 0.005})
    view = _exceeded(stack, run_id, "max_cost_usd")
    assert view["budgets"]["used"]["cost_usd"] == pytest.approx(0.006)
    assert view["error_message"] == "max_cost_usd: $0.0060 used of $0.0050"


def test_max_wall(stack: Stack) -> None:
    run_id = _model_run(stack, "wall", {"max_wall_s": 1})
    view = _exceeded(stack, run_id, "max_wall_s")
    assert view["budgets"]["used"]["wall_s"] >= 1.3


def test_max_model_turns(stack: Stack) -> None:
    # The compile is turn 1; the opencode step would be turn 2: it is never sent.
    run_id = _model_run(stack, "turns", {"max_model_turns": 1}, policy_profile="opencode")
    view = stack.wait(run_id, {"waiting_approval", "failed"})
    assert view["status"] == "waiting_approval", view
    assert view["budgets"]["used"]["model_turns"] == 1  # shown on the plan card already
    _approve(stack, run_id, view["plan_card"]["plan_digest"])
    view = _exceeded(stack, run_id, "max_model_turns")
    assert view["error_message"] == "max_model_turns: 1 used of 1; the next call would cross it"
    kinds = [r[0] for r in stack.sql("SELECT kind FROM calls WHERE run_id = :r", r=run_id)]
    assert kinds == ["provider"]


def test_a_wider_budget_is_refused_at_submit(stack: Stack) -> None:
    before = stack.sql("SELECT COUNT(*) FROM runs")[0][0]
    r = stack.submit(
        {"recipe": "echo", "objective": "greedy", "budgets": {"max_tokens": 2_000_001}}
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "budget_widened"
    assert error["details"] == {"budget": "max_tokens", "requested": 2_000_001, "limit": 2_000_000}
    assert stack.sql("SELECT COUNT(*) FROM runs")[0][0] == before  # nothing written


def test_budget_episodes_conform_upstream(stack: Stack, shared_dir: Path | None) -> None:
    if shared_dir is None or not (shared_dir / "mova-4.1.1").is_dir():
        pytest.skip("../shared/mova-4.1.1 (upstream MOVA 4.1.1) is absent: no conformance check")
    upstream = load_upstream(shared_dir)
    run_id = _model_run(stack, "tokens", {"max_tokens": 500})
    _exceeded(stack, run_id, "max_tokens")
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    for ep in episodes:
        assert upstream.errors(ep["body"]) == [], ep


# ---------------------------------------------------------------- a crash mid-run
@pytest.mark.slow
def test_a_crash_does_not_reset_what_was_spent(db_url: str, tmp_path: Path) -> None:
    """A worker killed after step s2's call completed; the recovered run counts s1 and
    s2 again from their recorded results and stops before s3, as an uninterrupted run
    does."""
    workspaces = tmp_path / "ws"
    plan = _noop_plan("four notes", 4)
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    body = {
        "recipe": "echo",
        "objective": "crash",
        "mode": "run-plan",
        "plan": plan,
        "budgets": {"max_steps": 2},
    }
    with shim_client(db_url) as client:
        crashed, straight = (client.post("/intent", json=body).json()["run_id"] for _ in "ab")
        for run_id in (crashed, straight):
            assert (
                client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
            )
        # Both runs are queued; worker A takes them and dies after s2 of the first one it runs.
        crashing = start_worker(
            db_url,
            "budget-w",
            workspaces,
            tmp_path / "a.log",
            {"GATEHOUSE_CRASH_POINT": "after_completion:s2", "GATEHOUSE_WORKER_CONCURRENCY": "1"},
        )
        try:
            assert crashing.wait(timeout=90) == 137, (tmp_path / "a.log").read_text()
        finally:
            stop([crashing])
        recovering = start_worker(db_url, "budget-w", workspaces, tmp_path / "b.log")
        try:
            views = [
                wait_for_status(
                    lambda rid: client.get(f"/runs/{rid}").json(),
                    rid,
                    {"succeeded", "failed"},
                    timeout=90,
                )
                for rid in (crashed, straight)
            ]
            for view in views:
                assert view["error_code"] == "budget_exceeded", view
                assert view["budgets"]["used"]["steps"] == 2
                assert [s["status"] for s in view["steps"]] == ["succeeded", "succeeded", "failed"]
                ledger = client.get(f"/runs/{view['run_id']}/ledger").json()["calls"]
                assert sorted(c["step_id"] for c in ledger) == ["s1", "s2"]
                replayed = client.post(
                    f"/runs/{view['run_id']}/replay", headers=client.people.auth("olga")
                )
                assert replayed.status_code == 200, replayed.text
                assert replayed.json()["match"] is True, replayed.json()
            assert views[0]["budgets"]["used"] == {
                **views[1]["budgets"]["used"],
                "wall_s": views[0]["budgets"]["used"]["wall_s"],
            }
        finally:
            stop([recovering])
