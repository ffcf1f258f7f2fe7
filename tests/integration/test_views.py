"""The operator views (``ledger/views/``): known runs in, their rows out, on both databases.

Each view is a versioned contract: these tests pin what its columns mean.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from tests.support.plans import ECHO, NOTE, digest_of_plan
from tests.support.stack import Stack, wait_workflow_status


def _run(stack: Stack, steps: list[dict[str, Any]], decide: str | None) -> str:
    plan = {"objective": "views", "steps": steps}
    r = stack.submit({"recipe": "echo", "objective": "views", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    if decide is not None:
        digest = digest_of_plan(plan)
        r = stack.client.post(f"/{decide}/{run_id}", json={"plan_digest": digest})
        assert r.status_code == 200, r.text
        stack.wait(run_id, {"succeeded", "failed", "rejected"})
    return run_id


def _rows(stack: Stack, sql: str, **params: Any) -> list[dict[str, Any]]:
    names = [c.strip() for c in sql.split("SELECT", 1)[1].split("FROM", 1)[0].split(",")]
    return [dict(zip(names, row, strict=True)) for row in stack.sql(sql, **params)]


def test_views_over_known_runs(stack: Stack) -> None:
    done = _run(stack, [NOTE], "approve")
    broken = _run(stack, [{**ECHO, "output_schema_ref": "ds.http_json_ok_v1"}], "approve")
    refused = _run(stack, [NOTE], "reject")
    waiting = _run(stack, [NOTE], None)
    # a run's status is written a moment before DBOS records its stretch's end;
    # waiting is rows only: its first stretch parked the run and ended
    for run_id in (done, broken, refused, waiting):
        assert wait_workflow_status(run_id, "SUCCESS") == "SUCCESS", run_id
    assert stack.client.get("/runs", headers={"Authorization": "Bearer nope"}).status_code == 401

    phases = {
        r["run_id"]: r
        for r in _rows(
            stack,
            "SELECT run_id, status, phase, approved_by, dbos_status, executor_id,"
            " seconds_since_change, parked_at FROM v_run_phases",
        )
    }
    assert phases[done]["status"] == "succeeded" and phases[done]["approved_by"] == "bob"
    assert phases[done]["dbos_status"] == "SUCCESS"
    assert phases[done]["executor_id"] == f"test-{stack.backend}"
    assert phases[refused]["approved_by"] is None and phases[refused]["dbos_status"] == "SUCCESS"
    assert phases[waiting]["status"] == "waiting_approval"
    assert phases[waiting]["dbos_status"] == "SUCCESS"
    assert phases[waiting]["parked_at"] == "@approval"
    assert phases[done]["parked_at"] is None
    assert 0 <= float(phases[waiting]["seconds_since_change"]) < 120
    # each run's DBOS status is its latest stretch's, as DBOS itself lists it
    for run_id, row in phases.items():
        latest = DBOS.list_workflows(
            workflow_id_prefix=run_id, sort_desc=True, limit=1, load_input=False
        )
        assert row["dbos_status"] == latest[0].status, run_id

    waits = _rows(stack, "SELECT run_id, seconds_waiting FROM v_waiting_approval")
    assert [w["run_id"] for w in waits] == [waiting]
    assert 0 <= float(waits[0]["seconds_waiting"]) < 120

    calls = _rows(
        stack,
        "SELECT step_id, kind, status, duration_ms, prompt_tokens, model FROM v_calls"
        " WHERE run_id = :r",
        r=done,
    )
    assert [(c["step_id"], c["kind"], c["status"]) for c in calls] == [("n", "tool", "completed")]
    assert calls[0]["duration_ms"] is not None and calls[0]["prompt_tokens"] is None

    failures = _rows(
        stack,
        "SELECT run_id, step_id, driver_kind, error_code, is_stall, is_timeout"
        " FROM v_step_failures",
    )
    assert failures == [
        {
            "run_id": broken,
            "step_id": "e",
            "driver_kind": "restricted_shell",
            "error_code": "output_invalid",
            "is_stall": 0,
            "is_timeout": 0,
        }
    ]

    outcomes = _rows(
        stack,
        "SELECT recipe, policy_profile, runs, succeeded, failed, rejected, unfinished,"
        " success_rate FROM v_recipe_outcomes",
    )
    assert len(outcomes) == 1
    echo = outcomes[0]
    assert (echo["recipe"], echo["policy_profile"]) == ("echo", "default")
    assert (echo["runs"], echo["succeeded"], echo["failed"], echo["rejected"]) == (4, 1, 1, 1)
    assert echo["unfinished"] == 1
    assert abs(float(echo["success_rate"]) - 1 / 3) < 1e-9

    security = _rows(stack, "SELECT category, error_code, events FROM v_security_by_category")
    assert {"category": "auth", "error_code": "unauthorized", "events": 1} in [
        {**s, "events": int(s["events"])} for s in security
    ]

    workers = _rows(stack, "SELECT executor_id, heartbeat_age_s, pending_workflows FROM v_workers")
    assert [w["executor_id"] for w in workers] == [f"test-{stack.backend}"]
    assert 0 <= float(workers[0]["heartbeat_age_s"]) < 60
    assert int(workers[0]["pending_workflows"]) == 0  # the run waiting for approval is rows

    budgets = _rows(
        stack,
        "SELECT run_id, steps_used, max_steps, tokens_used, cost_usd, exceeded FROM v_budgets"
        " WHERE run_id = :r",
        r=done,
    )
    assert budgets[0]["steps_used"] == 1 and budgets[0]["max_steps"] == 200
    assert budgets[0]["tokens_used"] == 0 and float(budgets[0]["cost_usd"]) == 0.0
    assert budgets[0]["exceeded"] is None

    # the waiting run is decided, so the module's replay at teardown has finished runs only
    plan = {"objective": "views", "steps": [NOTE]}
    digest = digest_of_plan(plan)
    assert stack.client.post(f"/reject/{waiting}", json={"plan_digest": digest}).status_code == 200
    stack.wait(waiting, {"rejected"})
