"""Tokens change under a running shim: revoked, expired and rotated tokens are refused
from the next look at the file on, with their own codes, and the refusal names the
token's id. The changes go through the CLI against the shim's own tokens file."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from contracts import Role
from shim.cli import build_parser
from shim.cli.commands.tokens import run as run_tokens
from shim.tokens import RECHECK_S, Issued, issue_token, read_tokens
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import Stack

# Long enough that the shim has looked at the file again.
SEEN = RECHECK_S + 0.2


def _issue(stack: Stack, name: str, roles: list[Role], **when: Any) -> Issued:
    return issue_token(stack.client.people.file, name, roles, expires_at=when.get("expires_at"))


def _cli(stack: Stack, *argv: str) -> int:
    args = ["tokens", *argv, "--file", str(stack.client.people.file)]
    return run_tokens(build_parser().parse_args(args))


def _get(stack: Stack, token: str) -> Any:
    return stack.client.get("/workers", headers={"Authorization": f"Bearer {token}"})


def _code(r: Any) -> str:
    return str(r.json()["error"]["code"])


def _events(stack: Stack, code: str) -> list[dict[str, Any]]:
    listed = stack.client.get("/security-events", headers=stack.auth("olga")).json()
    return [
        e["result_details"]
        for e in listed["security_events"]
        if e["security_event_type"] == f"gatehouse:{code}"
    ]


def test_revoked_and_expired_tokens_are_refused_without_a_restart(stack: Stack) -> None:
    live = _issue(stack, "tina", [Role.OPERATOR])
    past = datetime.now(UTC) - timedelta(minutes=1)
    old = _issue(stack, "tom", [Role.OPERATOR], expires_at=past)
    time.sleep(SEEN)
    assert _get(stack, live.token).status_code == 200
    r = _get(stack, old.token)
    assert r.status_code == 401 and _code(r) == "token_expired", r.text
    assert r.json()["error"]["details"]["token_id"] == old.entry.token_id

    assert live.entry.token_id is not None
    assert _cli(stack, "revoke", live.entry.token_id) == 0
    time.sleep(SEEN)
    r = _get(stack, live.token)
    assert r.status_code == 401 and _code(r) == "token_revoked", r.text
    assert live.token not in r.text
    # the refusals are security events that name the token, never the secret
    revoked = _events(stack, "token_revoked")
    assert any(d.get("token_id") == live.entry.token_id for d in revoked), revoked
    assert any(d.get("token_id") == old.entry.token_id for d in _events(stack, "token_expired"))
    listed = json.dumps(stack.client.get("/security-events", headers=stack.auth("olga")).json())
    assert live.token not in listed and live.entry.sha256 not in listed


def test_a_rotated_token_works_until_its_grace_ends(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _issue(stack, "rita", [Role.OPERATOR])
    time.sleep(SEEN)
    assert _get(stack, old.token).status_code == 200
    assert old.entry.token_id is not None
    rotated_at = time.monotonic()
    grace = 3
    assert _cli(stack, "rotate", old.entry.token_id, "--grace", f"{grace}s") == 0
    new = capsys.readouterr().out.splitlines()[-1]
    time.sleep(SEEN)
    assert time.monotonic() - rotated_at < grace, "the machine is too slow for this grace"
    assert _get(stack, old.token).status_code == 200  # both work in the grace
    assert _get(stack, new).status_code == 200
    # Until the end the file states (the rotation's own clock, read after the CLI's
    # start: a slow machine starts it later than rotated_at), and a little more.
    ends = next(
        e.expires_at for e in read_tokens(stack.client.people.file)
        if e.token_id == old.entry.token_id
    )  # fmt: skip
    assert ends is not None
    time.sleep(max(0.0, (ends - datetime.now(UTC)).total_seconds() + 0.2))
    r = _get(stack, old.token)
    assert r.status_code == 401 and _code(r) == "token_expired", r.text
    details = r.json()["error"]["details"]
    replaced = next(e for e in read_tokens(stack.client.people.file) if e.identity == "rita"
                    and e.token_id != old.entry.token_id)  # fmt: skip
    assert details["replaced_by"] == replaced.token_id
    assert _get(stack, new).status_code == 200


def test_a_dashboard_session_ends_when_its_token_is_revoked(stack: Stack) -> None:
    dee = _issue(stack, "dee", [Role.OPERATOR])
    time.sleep(SEEN)
    browser = TestClient(stack.client.app, follow_redirects=False)
    r = browser.post("/dashboard/login", data={"token": dee.token, "next": "/dashboard"})
    assert r.status_code == 303, r.text
    assert browser.get("/dashboard").status_code == 200
    assert dee.entry.token_id is not None
    assert _cli(stack, "revoke", dee.entry.token_id) == 0
    time.sleep(SEEN)
    r = browser.get("/dashboard/approvals")
    assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/login")
    again = TestClient(stack.client.app, follow_redirects=False)
    r = again.post("/dashboard/login", data={"token": dee.token})
    assert r.status_code == 401 and "That token was revoked." in r.text
    named = [d for d in _events(stack, "token_revoked") if d.get("token_id") == dee.entry.token_id]
    assert len(named) >= 2  # the stale session and the login


def test_decisions_and_refusals_name_the_token_used(stack: Stack) -> None:
    ann = _issue(stack, "ann2", [Role.APPROVER])
    time.sleep(SEEN)
    auth = {"Authorization": f"Bearer {ann.token}"}
    # a refusal of a valid token's request names its token as well
    r = stack.client.get("/security-events", headers=auth)
    assert r.status_code == 403
    forbidden = _events(stack, "forbidden")
    assert any(d.get("token_id") == ann.entry.token_id for d in forbidden), forbidden

    plan = noop_plan(1)
    r = stack.submit({"recipe": "echo", "objective": "tokens", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    r = stack.client.post(
        f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)}, headers=auth
    )
    assert r.status_code == 200 and r.json()["decided_by"] == "ann2", r.text
    stack.wait(run_id, {"succeeded"})
    bodies = stack.sql(
        "SELECT body_json FROM run_events WHERE run_id = :r AND kind = 'approval'", r=run_id
    )
    assert [json.loads(b[0])["token_id"] for b in bodies] == [ann.entry.token_id]
