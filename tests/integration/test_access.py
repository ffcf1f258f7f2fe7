"""Who may do what: tokens, roles, four-eyes, identity from the token, recorded refusals."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.stack import Stack


def echo(**extra: Any) -> dict[str, Any]:
    return {"recipe": "echo", "objective": "access test", "parameters": {"n": 1}, **extra}


def test_no_token_and_bad_token_are_refused_and_recorded(stack: Stack) -> None:
    r = stack.client.post("/intent", json=echo(), headers={"Authorization": ""})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = stack.client.get("/runs", headers={"Authorization": "Bearer gh_not-a-token"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert stack.client.get("/healthz", headers={"Authorization": ""}).status_code == 200
    events = stack.client.get("/security-events", headers=stack.auth("olga")).json()
    types = [e["security_event_type"] for e in events["security_events"]]
    assert types.count("gatehouse:unauthorized") >= 2
    auth = next(e for e in events["security_events"] if e["security_event_category"] == "auth")
    assert auth["episode_type"] == "security_event/unauthorized"


@pytest.mark.parametrize(
    ("who", "method", "path", "body"),
    [
        ("ann", "POST", "/intent", echo()),  # approver only: may not submit
        ("olga", "POST", "/intent", echo()),  # operator only: may not submit
        ("sam", "GET", "/policies", None),
        ("sam", "GET", "/security-events", None),
        ("alice", "POST", "/approve/run_" + "0" * 32, {"plan_digest": "0" * 64}),
    ],
)
def test_roles(stack: Stack, who: str, method: str, path: str, body: Any) -> None:
    r = stack.client.request(method, path, json=body, headers=stack.auth(who))
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "forbidden"


def test_identity_comes_from_the_token(stack: Stack) -> None:
    r = stack.client.post("/intent", json=echo(submitted_by="bob"), headers=stack.auth("sam"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = stack.client.post("/intent", json=echo(), headers=stack.auth("sam"))
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    view = stack.client.get(f"/runs/{run_id}", headers=stack.auth("sam")).json()
    assert view["submitted_by"] == "sam"
    # a submitter reads its own runs only
    theirs = stack.submit(echo()).json()["run_id"]  # alice's
    r = stack.client.get(f"/runs/{theirs}", headers=stack.auth("sam"))
    assert r.status_code == 403


def test_four_eyes(stack: Stack) -> None:
    r = stack.client.post("/intent", json=echo(), headers=stack.auth("max"))
    run_id = r.json()["run_id"]
    view = stack.wait(run_id, {"waiting_approval"})
    digest = view["plan_card"]["plan_digest"]
    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": digest}, headers=stack.auth("max")
    )
    assert r.status_code == 403 and r.json()["error"]["code"] == "four_eyes"
    assert stack.sql("SELECT COUNT(*) FROM plan_approvals WHERE run_id = :r", r=run_id) == [(0,)]
    events = stack.client.get("/security-events", headers=stack.auth("olga")).json()
    four = [e for e in events["security_events"] if e["episode_type"] == "security_event/four_eyes"]
    assert four and four[0]["result_details"]["run_id"] == run_id
    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": digest}, headers=stack.auth("ann")
    )
    assert r.status_code == 200 and r.json()["decided_by"] == "ann"
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"


def test_policies_and_the_digests_a_run_records(stack: Stack) -> None:
    policies = stack.client.get("/policies", headers=stack.auth("olga")).json()
    profiles = {p["content"]["profile_id"]: p for p in policies["profiles"]}
    assert {"default", "auto-read-only"} <= set(profiles)
    assert (
        profiles["default"]["text_channels"]["/content/planner_instruction"] == "model_instruction"
    )
    one = stack.client.get("/policies/default", headers=stack.auth("olga")).json()
    assert one["profile"]["digest"] == profiles["default"]["digest"]
    assert one["tool_pool"]["content"]["tool_pool_id"] == "default"
    assert stack.client.get("/policies/nope", headers=stack.auth("olga")).status_code == 404

    run_id = stack.submit(echo()).json()["run_id"]
    view = stack.wait(run_id, {"waiting_approval"})
    assert view["profile_digest"] == profiles["default"]["digest"]
    assert view["tool_pool_digest"] == one["tool_pool"]["digest"]
