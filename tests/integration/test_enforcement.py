"""The policy holds after approval too: tampering, auto-approval, output contracts."""

from __future__ import annotations

import json
from typing import Any

from contracts import Plan, digest_of
from tests.support.plans import ECHO, NOTE
from tests.support.stack import Stack


def _tool_calls(stack: Stack, run_id: str) -> int:
    rows = stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id)
    return int(rows[0][0])


def test_a_plan_changed_after_its_card_never_runs(stack: Stack) -> None:
    run_id = stack.submit({"recipe": "echo", "objective": "tamper", "parameters": {"a": 1}}).json()[
        "run_id"
    ]
    card = stack.wait(run_id, {"waiting_approval"})["plan_card"]
    evil = json.loads(json.dumps(card["plan"]))
    evil["steps"][0]["input"] = {"parameters": {"a": 2}}
    stack.execute(
        "UPDATE plan_cards SET plan_json = :j WHERE run_id = :r", j=json.dumps(evil), r=run_id
    )
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": card["plan_digest"]})
    assert r.status_code == 200, r.text
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "failed" and done["error_code"] == "plan_tampered"
    assert _tool_calls(stack, run_id) == 0
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    assert "security_event/plan_tampered" in [e["episode_type"] for e in episodes]


def test_a_card_rewritten_with_its_own_digest_fails_instead_of_waiting(stack: Stack) -> None:
    """A card rewritten whole (another plan, and that plan's digest): the shim binds
    an approval to the card, the run waits on the digest it put up. The approval ends
    the wait and fails the plan check (plan_tampered) instead of leaving the run
    parked for a decision nobody can make."""
    run_id = stack.submit(
        {"recipe": "echo", "objective": "rewrite", "parameters": {"a": 1}}
    ).json()["run_id"]
    card = stack.wait(run_id, {"waiting_approval"})["plan_card"]
    evil = json.loads(json.dumps(card["plan"]))
    evil["steps"][0]["input"] = {"parameters": {"a": 2}}
    evil_digest = digest_of(Plan.model_validate(evil).model_dump(mode="json"))
    stack.execute(
        "UPDATE plan_cards SET plan_json = :j, plan_digest = :d WHERE run_id = :r",
        j=json.dumps(evil),
        d=evil_digest,
        r=run_id,
    )
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": evil_digest})
    assert r.status_code == 200, r.text
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "failed" and done["error_code"] == "plan_tampered", done
    assert _tool_calls(stack, run_id) == 0


def _run_plan(steps: list[dict[str, Any]], profile: str = "default") -> dict[str, Any]:
    return {
        "recipe": "echo",
        "objective": "enforcement",
        "mode": "run-plan",
        "policy_profile": profile,
        "plan": {"objective": "enforcement", "steps": steps},
    }


def test_auto_read_only_profile_approves_only_read_only_plans(stack: Stack) -> None:
    run_id = stack.submit(_run_plan([NOTE], "auto-read-only")).json()["run_id"]
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    assert [(a["decision"], a["decided_by"]) for a in done["approvals"]] == [
        ("approved", "policy:auto-read-only")
    ]
    # a plan that runs a command still waits for a person
    run_id = stack.submit(_run_plan([NOTE, ECHO], "auto-read-only")).json()["run_id"]
    view = stack.wait(run_id, {"waiting_approval", "succeeded", "failed"})
    assert view["status"] == "waiting_approval" and view["approvals"] == []


def test_one_read_only_plan_twice_is_approved_for_each_run(stack: Stack) -> None:
    """Two runs of one plan (a template run, or another submitter's predictable one)
    share its digest: each run's automatic approval is its own record, and both run.
    (The approval's id was made from the digest alone: the second run's met the
    first's row, its workflow died, and it stayed ``running`` for ever.)"""
    body = _run_plan([NOTE], "auto-read-only")
    first, second = (stack.submit(body).json()["run_id"] for _ in range(2))
    for run_id in (first, second):
        done = stack.wait(run_id, {"succeeded", "failed"}, timeout=30)
        assert done["status"] == "succeeded", done
        assert [(a["decision"], a["decided_by"]) for a in done["approvals"]] == [
            ("approved", "policy:auto-read-only")
        ]
    ids = stack.sql(
        "SELECT DISTINCT approval_id FROM plan_approvals WHERE run_id IN (:a, :b)",
        a=first,
        b=second,
    )
    assert len(ids) == 2


def test_output_that_breaks_its_declared_schema_fails_the_step(stack: Stack) -> None:
    steps = [{**ECHO, "output_schema_ref": "ds.http_json_ok_v1"}, NOTE]
    body = _run_plan(steps)
    run_id = stack.submit(body).json()["run_id"]
    digest = digest_of(Plan.model_validate(body["plan"]).model_dump(mode="json"))
    assert stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "failed" and done["error_code"] == "output_invalid"
    assert [s["step_id"] for s in done["steps"]] == ["e"]  # the note after it never ran
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    assert "security_event/output_invalid" in [e["episode_type"] for e in episodes]


def test_unknown_output_schema_is_refused_at_the_gate(stack: Stack) -> None:
    r = stack.submit(_run_plan([{**NOTE, "output_schema_ref": "ds.nope_v1"}]))
    assert r.status_code == 422 and r.json()["error"]["code"] == "plan_invalid"


def test_a_corrupt_row_is_a_security_event_not_a_crash(stack: Stack) -> None:
    run_id = stack.submit({"recipe": "echo", "objective": "corrupt", "parameters": {}}).json()[
        "run_id"
    ]
    stack.wait(run_id, {"waiting_approval"})
    stack.execute("UPDATE runs SET status = 'bogus' WHERE run_id = :r", r=run_id)
    r = stack.client.get(f"/runs/{run_id}")
    assert r.status_code == 500 and r.json()["error"]["code"] == "corrupt_record"
    assert r.json()["error"]["details"]["table"] == "runs"
    events = stack.client.get("/security-events", headers=stack.auth("olga")).json()
    corrupt = [
        e for e in events["security_events"] if e["episode_type"] == "security_event/corrupt_record"
    ]
    assert corrupt and corrupt[0]["security_event_category"] == "data_access"
    stack.execute("UPDATE runs SET status = 'waiting_approval' WHERE run_id = :r", r=run_id)
