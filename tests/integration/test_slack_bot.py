"""A Slack sink that posts with the Web API (a bot token) keeps a handle on each
message about a waiting plan and updates it when the plan closes, with nobody
clicking: decided through the API, expired (default deny), or the update retried
after Slack failed it. A click on such a message still decides, as with a webhook
sink. Slack cannot run here: a loopback server answers as Slack's Web API does,
and slack_sdk's own WebClient talks to it. Both databases."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from ledger import open_database, slack_messages
from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.slack_api import Call, SlackWebApi
from tests.support.stack import BACKENDS, Stack, running_stack

TOKEN_ENV, TOKEN = "GATEHOUSE_TEST_SLACK_BOT_TOKEN", "xoxb-test-0123456789"
SIGNING_ENV, SIGNING_SECRET = "GATEHOUSE_TEST_SLACK_BOT_SECRET", "0f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture(scope="module", params=BACKENDS)
def bot(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, SlackWebApi]]:
    require_backend(request.param)
    tmp = tmp_path_factory.mktemp(f"slack-bot-{request.param}")
    os.environ[TOKEN_ENV], os.environ[SIGNING_ENV] = TOKEN, SIGNING_SECRET
    with SlackWebApi(TOKEN, channel_ids={"approvals": "C0APPROVALS"}) as api:
        notifications = tmp / "notifications.yaml"
        notifications.write_text(json.dumps({
            "dashboard_url": "http://gatehouse.test:8000",
            "sinks": [
                {"id": "desk", "kind": "slack", "bot_token_env": TOKEN_ENV,
                 "channel": "approvals", "api_url": api.api_url, "buttons": True,
                 "events": ["waiting_approval"]},
            ],
            "poll_s": 0.1,
            "backoff_s": 0.2,
        }))  # fmt: skip
        slack_file = tmp / "slack.yaml"
        slack_file.write_text(json.dumps({
            "signing_secret_env": SIGNING_ENV, "users": {"U0BOB": "bob"},
            "response_hosts": [api.url.removeprefix("http://")],
        }))  # fmt: skip
        with running_stack(
            request.param,
            tmp,
            worker_env={"GATEHOUSE_NOTIFICATIONS": str(notifications)},
            shim_env={"GATEHOUSE_SLACK": str(slack_file)},
        ) as stack:
            yield stack, api


def _waiting(stack: Stack, objective: str) -> tuple[str, str]:
    """A run alice submitted, waiting at its plan card: its id and plan digest."""
    plan = noop_plan(1)
    body = {"recipe": "echo", "objective": objective, "mode": "run-plan", "plan": plan}
    r = stack.client.post("/intent", json=body, headers=stack.client.people.auth("alice"))
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id, digest_of_plan(plan)


def _posted(api: SlackWebApi, run_id: str) -> Call:
    [post] = api.wait_for("chat.postMessage", 1, about=run_id)
    assert post.token == TOKEN and post.body["channel"] == "approvals"
    return post


def _kept(stack: Stack, run_id: str, closed: bool) -> list[slack_messages.SlackMessage]:
    """The run's messages in the ledger, once they are (closed or open) as asked."""
    db = open_database(stack.database_url)
    deadline = time.monotonic() + 20
    try:
        while True:
            with db.engine.connect() as conn:
                kept = slack_messages.messages_of(conn, run_id)
            if kept and all((m.closed_at is not None) == closed for m in kept):
                return kept
            assert time.monotonic() < deadline, f"messages of {run_id}: {kept}"
            time.sleep(0.05)
    finally:
        db.dispose()


def _updates(api: SlackWebApi, run_id: str, count: int = 1) -> list[Call]:
    return api.wait_for("chat.update", count, about=run_id)


def _check_closed(update: Call, post: Call, ts: str, says: str) -> None:
    body = update.body
    assert (body["channel"], body["ts"]) == ("C0APPROVALS", ts)
    assert not [b for b in body["blocks"] if b["type"] == "actions"]  # the buttons are gone
    assert body["blocks"][0] == post.body["blocks"][0]  # what the message said stays
    line = body["blocks"][-1]["elements"][0]["text"]
    assert says in line and line in body["text"], line
    assert " UTC" in line


def test_a_plan_approved_through_the_api_updates_its_message(
    bot: tuple[Stack, SlackWebApi],
) -> None:
    stack, api = bot
    run_id, digest = _waiting(stack, "approved elsewhere")
    post = _posted(api, run_id)
    assert [b["type"] for b in post.body["blocks"]] == ["section", "actions"]
    [kept] = _kept(stack, run_id, closed=False)
    assert (kept.channel, kept.plan_digest) == ("C0APPROVALS", digest)  # Slack's channel id
    assert api.on("chat.update", about=run_id) == []  # nothing happened yet

    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})  # bob, by API
    assert ok.status_code == 200, ok.text
    [update] = _updates(api, run_id)
    _check_closed(update, post, kept.ts, "Approved by bob, ")
    assert update.token == TOKEN
    [closed] = _kept(stack, run_id, closed=True)
    assert closed.closed_line is not None and closed.closed_line.startswith("Approved by bob")
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    time.sleep(1)
    assert len(api.on("chat.update", about=run_id)) == 1  # closed once, updated once


def test_an_expired_plan_updates_its_message_with_nobody_clicking(
    bot: tuple[Stack, SlackWebApi],
) -> None:
    stack, api = bot
    run_id, _ = _waiting(stack, "nobody decides")
    post = _posted(api, run_id)
    [kept] = _kept(stack, run_id, closed=False)
    deadline = time.monotonic() + 30
    while not stack.sql("SELECT 1 FROM runs WHERE run_id = :r AND parked_wait IS NOT NULL",
                        r=run_id):  # fmt: skip
        assert time.monotonic() < deadline, "the run never parked"
        time.sleep(0.05)
    stack.execute(  # a day passes
        "UPDATE runs SET parked_until = '2000-01-01T00:00:00.000Z' WHERE run_id = :r", r=run_id
    )
    [update] = _updates(api, run_id)
    # when the wait ended: its deadline, or (once the expiry sweep ended the run) the run's end
    _check_closed(update, post, kept.ts, "with no decision: denied")
    assert update.body["blocks"][-1]["elements"][0]["text"].startswith("Expired at ")
    assert stack.wait(run_id, {"failed"})["error_code"] == "approval_timeout"  # default deny


def test_a_failed_update_is_sent_again(bot: tuple[Stack, SlackWebApi]) -> None:
    stack, api = bot
    run_id, digest = _waiting(stack, "slack is down")
    post = _posted(api, run_id)
    [kept] = _kept(stack, run_id, closed=False)
    api.fail_next("chat.update", run_id)  # Slack answers the first update 500
    no = stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest})
    assert no.status_code == 200, no.text
    first, second = _updates(api, run_id, 2)
    assert (first.answered, second.answered) == (500, 200)
    assert first.body == second.body  # the same update, sent again
    _check_closed(second, post, kept.ts, "Rejected by bob, ")
    [(status, attempts, error)] = _delivery(stack, run_id)
    assert (status, attempts) == ("delivered", 2) and error is None
    assert stack.wait(run_id, {"rejected"})["status"] == "rejected"


def _delivery(stack: Stack, run_id: str) -> list[Any]:
    deadline = time.monotonic() + 20
    while True:
        rows = stack.sql(
            "SELECT status, attempts, last_error FROM notification_deliveries"
            " WHERE run_id = :r AND event = 'slack_update'",
            r=run_id,
        )
        if (rows and rows[0][0] == "delivered") or time.monotonic() > deadline:
            return list(rows)
        time.sleep(0.05)


def test_a_click_on_a_bots_message_decides_and_both_updates_agree(
    bot: tuple[Stack, SlackWebApi],
) -> None:
    stack, api = bot
    run_id, digest = _waiting(stack, "clicked")
    post = _posted(api, run_id)
    [kept] = _kept(stack, run_id, closed=False)
    [buttons] = [b for b in post.body["blocks"] if b["type"] == "actions"]
    payload = {
        "type": "block_actions", "user": {"id": "U0BOB"}, "team": {"id": "T0TEST"},
        "actions": [{"action_id": "gatehouse_approve", "block_id": buttons["block_id"],
                     "value": buttons["elements"][0]["value"]}],
        "response_url": f"{api.url}/response/{run_id}",
        "message": {"text": post.body["text"], "blocks": post.body["blocks"], "ts": kept.ts},
    }  # fmt: skip
    form = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=stamp, body=form)
    r = stack.client.post("/slack/interactions", content=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": "",
        "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": str(signature)})  # fmt: skip
    assert r.json() == {"outcome": "approved", "run_id": run_id, "decided_by": "bob",
                        "recorded": True}  # fmt: skip
    [reply] = api.wait_for("", 1, path=f"/response/{run_id}")
    assert "Approved by bob (<@U0BOB>)" in reply.body["text"]
    [update] = _updates(api, run_id)  # the bot's own update says the same
    _check_closed(update, post, kept.ts, "Approved by bob, ")
    approvals = stack.client.get(f"/runs/{run_id}").json()["approvals"]
    assert [(a["decided_by"], a["plan_digest"]) for a in approvals] == [("bob", digest)]


def test_an_edit_and_a_cancel_close_their_messages_saying_so(
    bot: tuple[Stack, SlackWebApi],
) -> None:
    stack, api = bot
    run_id, digest = _waiting(stack, "to be edited")
    post = _posted(api, run_id)
    [kept] = _kept(stack, run_id, closed=False)
    edited = noop_plan(1, objective="edited")
    r = stack.client.post(f"/runs/{run_id}/plan", headers=stack.client.people.auth("bob"),
                          json={"plan": edited, "previous_digest": digest})  # fmt: skip
    assert r.status_code == 202, r.text
    new_run = r.json()["run_id"]
    [update] = _updates(api, run_id)
    _check_closed(update, post, kept.ts, f"Edited by bob into run {new_run}, ")

    # the edited plan's own message, closed when its run is cancelled
    stack.wait(new_run, {"waiting_approval"})
    post2 = _posted(api, new_run)
    [kept2] = _kept(stack, new_run, closed=False)
    assert kept2.plan_digest == digest_of_plan(edited)
    cancel = stack.client.post(f"/runs/{new_run}/cancel", json={"reason": "not today"},
                               headers=stack.client.people.auth("olga"))  # fmt: skip
    assert cancel.status_code in (200, 202), cancel.text
    [update2] = api.wait_for("chat.update", 1, about=kept2.ts)  # (the first names new_run too)
    _check_closed(update2, post2, kept2.ts, "The run was cancelled by olga, ")
