"""Decisions where people are: a plan's Slack message carries Approve and Reject,
a click comes back to ``POST /slack/interactions`` signed as Slack signs it, and
the message is replaced with who decided. Forged, stale and replayed requests are
refused; a person who may not decide is told privately; a plan nobody can decide
any more closes the message. Webhooks may be signed as Standard Webhooks specifies.
Slack itself cannot run here: the tests sign requests with slack_sdk's own signer
and the "Slack" that receives messages is a loopback receiver. Both databases."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier
from standardwebhooks import Webhook

from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.receivers import WebhookReceiver
from tests.support.stack import BACKENDS, Stack, running_stack

SIGNING_ENV, SIGNING_SECRET = "GATEHOUSE_TEST_SLACK_SECRET", "8f742231b10e8888abcd99yyyzzz85a5"
HOOK_ENV, HOOK_SECRET = "GATEHOUSE_TEST_STD_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
USERS = {"U0BOB": "bob", "U0ANN": "ann", "U0MAX": "max", "U0ALICE": "alice", "U0GONE": "gone"}


@pytest.fixture(scope="module", params=BACKENDS)
def slack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, WebhookReceiver]]:
    require_backend(request.param)
    tmp = tmp_path_factory.mktemp(f"slack-{request.param}")
    os.environ[SIGNING_ENV], os.environ[HOOK_ENV] = SIGNING_SECRET, HOOK_SECRET
    with WebhookReceiver() as hook:
        notifications = tmp / "notifications.yaml"
        notifications.write_text(json.dumps({
            "dashboard_url": "http://gatehouse.test:8000",
            "sinks": [
                {"id": "chat", "kind": "slack", "url": f"{hook.url}/slack", "buttons": True,
                 "events": ["waiting_approval"]},
                {"id": "std", "kind": "webhook", "url": f"{hook.url}/std", "secret_env": HOOK_ENV,
                 "signing": "standard-webhooks", "events": ["waiting_approval"]},
            ],
            "poll_s": 0.1,
        }))  # fmt: skip
        slack_file = tmp / "slack.yaml"
        host = hook.url.removeprefix("http://")
        slack_file.write_text(json.dumps(
            {"signing_secret_env": SIGNING_ENV, "users": USERS, "response_hosts": [host]}
        ))  # fmt: skip
        with running_stack(
            request.param,
            tmp,
            worker_env={"GATEHOUSE_NOTIFICATIONS": str(notifications)},
            shim_env={"GATEHOUSE_SLACK": str(slack_file)},
        ) as stack:
            yield stack, hook


def _waiting(stack: Stack, objective: str, submitter: str = "alice") -> tuple[str, str]:
    """A run waiting at its plan card: its id and plan digest."""
    plan = noop_plan(1)
    body = {"recipe": "echo", "objective": objective, "mode": "run-plan", "plan": plan}
    r = stack.client.post("/intent", json=body, headers=stack.client.people.auth(submitter))
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id, digest_of_plan(plan)


def _message(hook: WebhookReceiver, run_id: str) -> dict[str, Any]:
    """The Slack message that announced the run's plan."""
    found: dict[str, Any] = json.loads(hook.wait_for("/slack", 1, about=run_id)[0].body)
    return found


def _click(
    hook: WebhookReceiver, run_id: str, user: str, action: str = "gatehouse_approve",
    value: str | None = None,
) -> bytes:  # fmt: skip
    """The form Slack posts when ``user`` clicks ``action`` on the run's message."""
    message = _message(hook, run_id)
    [buttons] = [b for b in message["blocks"] if b["type"] == "actions"]
    [pressed] = [e for e in buttons["elements"] if e["action_id"] == action]
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower()},
        "team": {"id": "T0TEST"},
        "actions": [{"action_id": action, "block_id": buttons["block_id"], "type": "button",
                     "value": pressed["value"] if value is None else value}],
        "response_url": f"{hook.url}/response/{run_id}",
        "message": {"text": message["text"], "blocks": message["blocks"]},
    }  # fmt: skip
    return urlencode({"payload": json.dumps(payload)}).encode()


def _post(stack: Stack, body: bytes, secret: str = SIGNING_SECRET, at: float | None = None) -> Any:
    stamp = str(int(time.time() if at is None else at))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Authorization": "",
               "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": str(signature)}  # fmt: skip
    return stack.client.post("/slack/interactions", content=body, headers=headers)


def _replies(hook: WebhookReceiver, run_id: str, count: int) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in hook.wait_for(f"/response/{run_id}", count)]


def test_a_click_on_approve_decides_and_the_message_says_who(
    slack: tuple[Stack, WebhookReceiver],
) -> None:
    stack, hook = slack
    run_id, digest = _waiting(stack, "approve from slack")
    message = _message(hook, run_id)
    [buttons] = [b for b in message["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in buttons["elements"]] == ["gatehouse_approve",
                                                             "gatehouse_reject"]  # fmt: skip
    assert json.loads(buttons["elements"][0]["value"]) == {"run_id": run_id, "plan_digest": digest}

    click = _click(hook, run_id, "U0BOB")
    r = _post(stack, click)
    assert r.status_code == 200, r.text
    assert r.json() == {"outcome": "approved", "run_id": run_id, "decided_by": "bob",
                        "recorded": True}  # fmt: skip
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    approvals = stack.client.get(f"/runs/{run_id}").json()["approvals"]
    assert [(a["decided_by"], a["plan_digest"]) for a in approvals] == [("bob", digest)]
    [reply] = _replies(hook, run_id, 1)
    assert reply["replace_original"] is True
    assert "Approved by bob (<@U0BOB>)" in reply["blocks"][-1]["elements"][0]["text"]
    assert not [b for b in reply["blocks"] if b["type"] == "actions"]  # the buttons are gone
    assert reply["blocks"][0] == message["blocks"][0]  # what the message said stays

    again = _post(stack, click, at=time.time() + 1)  # the same form, signed anew: a new request
    assert again.json()["recorded"] is False  # a repeat of bob's decision
    stamp, signature = r.request.headers["x-slack-request-timestamp"], r.request.headers[
        "x-slack-signature"]  # fmt: skip
    replayed = stack.client.post("/slack/interactions", content=click, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": "",
        "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature})  # fmt: skip
    assert replayed.status_code == 409
    assert replayed.json()["error"]["code"] == "slack_request_replayed"


def test_forged_and_stale_clicks_are_refused_and_decide_nothing(
    slack: tuple[Stack, WebhookReceiver],
) -> None:
    stack, hook = slack
    run_id, _ = _waiting(stack, "not from slack")
    click = _click(hook, run_id, "U0BOB")
    forged = _post(stack, click, secret="not-the-apps-secret")
    assert forged.status_code == 401
    assert forged.json()["error"]["code"] == "slack_signature_invalid"
    stale = _post(stack, click, at=time.time() - 600)  # signed right, ten minutes old
    assert stale.status_code == 401
    assert stale.json()["error"]["code"] == "slack_request_stale"
    bare = stack.client.post("/slack/interactions", content=click, headers={"Authorization": ""})
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "slack_signature_invalid"
    tampered = _click(hook, run_id, "U0BOB", "gatehouse_reject")  # signed for another body
    good = _post(stack, click)
    forged_body = stack.client.post("/slack/interactions", content=tampered, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": "",
        "X-Slack-Request-Timestamp": good.request.headers["x-slack-request-timestamp"],
        "X-Slack-Signature": good.request.headers["x-slack-signature"]})  # fmt: skip
    assert forged_body.json()["error"]["code"] == "slack_signature_invalid"
    assert good.json()["outcome"] == "approved"  # the genuine click still decides
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    assert len(stack.client.get(f"/runs/{run_id}").json()["approvals"]) == 1


def test_who_may_not_decide_is_told_privately_and_the_buttons_stay(
    slack: tuple[Stack, WebhookReceiver],
) -> None:
    stack, hook = slack
    run_id, digest = _waiting(stack, "max asks", submitter="max")
    refusals = {
        "U0MAX": "four_eyes",  # submitted it (an approver too)
        "U0ALICE": "slack_user_unknown",  # mapped, but holds no approver token
        "U0GONE": "slack_user_unknown",  # mapped to an identity with no token at all
        "U0NOBODY": "slack_user_unknown",  # not in the Slack file
    }
    for user, code in refusals.items():
        r = _post(stack, _click(hook, run_id, user))
        assert r.status_code == 200, r.text
        assert (r.json()["outcome"], r.json()["error"]["code"]) == ("refused", code), user
    replies = _replies(hook, run_id, len(refusals))
    assert all(m["response_type"] == "ephemeral" and m["replace_original"] is False
               for m in replies)  # fmt: skip
    assert stack.run(run_id)["status"] == "waiting_approval"
    assert stack.client.get(f"/runs/{run_id}").json()["approvals"] == []

    rejected = _post(stack, _click(hook, run_id, "U0ANN", "gatehouse_reject"))
    assert rejected.json()["outcome"] == "rejected"
    assert stack.wait(run_id, {"rejected"})["status"] == "rejected"
    closing = _replies(hook, run_id, len(refusals) + 1)[-1]
    assert "Rejected by ann" in closing["text"]
    late = _post(stack, _click(hook, run_id, "U0BOB"))  # approve after ann rejected
    assert late.json()["error"]["code"] in ("already_decided", "run_not_awaiting_approval")
    closed = _replies(hook, run_id, len(refusals) + 2)[-1]
    assert closed["replace_original"] is True and "No longer open" in closed["text"]
    assert digest  # the refusals decided nothing on it


def test_a_click_on_an_expired_plan_closes_the_message(
    slack: tuple[Stack, WebhookReceiver],
) -> None:
    stack, hook = slack
    run_id, _ = _waiting(stack, "too late")
    deadline = time.monotonic() + 30
    while not stack.sql("SELECT parked_until FROM runs WHERE run_id = :r AND parked_wait"
                        " IS NOT NULL", r=run_id):  # fmt: skip
        assert time.monotonic() < deadline, "the run never parked"
        time.sleep(0.05)
    stack.execute(  # a day passes
        "UPDATE runs SET parked_until = '2000-01-01T00:00:00.000Z' WHERE run_id = :r", r=run_id
    )
    r = _post(stack, _click(hook, run_id, "U0BOB"))
    assert r.json()["error"]["code"] in ("approval_timeout", "run_not_awaiting_approval")
    [closed] = _replies(hook, run_id, 1)
    assert closed["replace_original"] is True and "No longer open" in closed["text"]
    assert stack.wait(run_id, {"failed"})["error_code"] == "approval_timeout"


def test_a_standard_webhooks_sink_is_verified_by_the_standard_library(
    slack: tuple[Stack, WebhookReceiver],
) -> None:
    stack, hook = slack
    run_id, digest = _waiting(stack, "standard")
    [got] = hook.wait_for("/std", 1, about=run_id)
    body = Webhook(HOOK_SECRET).verify(got.body, got.headers)
    assert (body["event"], body["run_id"], body["plan_digest"]) == (
        "waiting_approval", run_id, digest)  # fmt: skip
    assert got.headers["webhook-id"] == body["delivery_id"] == got.headers["ce-id"]
    assert got.headers["ce-specversion"] == "1.0"
    assert got.headers["ce-type"] == "com.gatehouse.run.waiting_approval"
    assert got.headers["ce-subject"] == run_id
    with pytest.raises(Exception, match="signature"):
        Webhook(HOOK_SECRET).verify(got.body.replace(b"standard", b"standarD"), got.headers)
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest})
