"""Notifications without a database: the file, the event names, payloads, signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from contracts import ErrorCode, GatehouseError, JsonObject, NotifyConfig
from ledger.notifications import PendingEvent, delivery_id
from ledger.slack_messages import Closing, SlackMessage, Why
from tests.support.slack_api import SlackWebApi
from worker.notify import load_config
from worker.notify.payload import (
    closing_line,
    email_message,
    event_name,
    payload,
    signature,
    slack_body,
    slack_update,
    standard_webhook_headers,
    webhook_headers,
)
from worker.notify.senders import DeliveryError, send

SINKS = {
    "sinks": [
        {"id": "ops", "kind": "webhook", "url": "http://h/x", "secret_env": "S",
         "events": ["failed", "finished"]},
        {"id": "mail", "kind": "email", "events": ["waiting_approval"],
         "smtp": {"host": "mx"}, "sender": "g@x", "to": ["a@x", "b@x"]},
    ]
}  # fmt: skip


def _event(kind: str, body: JsonObject) -> PendingEvent:
    return PendingEvent("run_1", 7, kind, body, "2026-01-01T00:00:00.000Z", "echo",
                        "obj <b>", "alice", "ab" * 32)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "body", "name"),
    [
        ("run.phase", {"status": "waiting_approval"}, "waiting_approval"),
        ("run.phase", {"status": "needs_operator"}, "needs_operator"),
        ("run.phase", {"status": "failed"}, "failed"),
        ("run.phase", {"status": "succeeded"}, "finished"),
        ("run.phase", {"status": "rejected"}, "finished"),
        ("run.phase", {"status": "running"}, None),
        ("run.phase", {"status": "no such status"}, None),
        ("episode", {"episode_type": "security_event/refusal"}, "security_event"),
        ("episode", {"episode_type": "execution/noop"}, None),
        ("step.started", {}, None),
    ],
)
def test_what_an_event_announces(kind: str, body: JsonObject, name: str | None) -> None:
    assert event_name(_event(kind, body)) == name


def test_payloads_are_stable_and_signed() -> None:
    config = NotifyConfig.model_validate(SINKS)
    event = _event("run.phase", {"status": "failed", "error_code": "x_y", "secret": "no"})
    data = payload(config, config.sinks[0], "failed", event)
    assert data == payload(config, config.sinks[0], "failed", event)  # the same every time
    assert data["delivery_id"] == delivery_id("run_1", 7, "failed", "ops")
    assert data["error_code"] == "x_y" and "secret" not in data
    assert data["links"] == {"dashboard": "http://127.0.0.1:8000/dashboard/runs/run_1",
                             "api": "http://127.0.0.1:8000/runs/run_1"}  # fmt: skip
    body = json.dumps(data).encode()
    headers = webhook_headers(data, body, "1700000000", b"k")
    expected = hmac.new(b"k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers["Gatehouse-Signature"] == f"v1={expected}" == signature(b"k", "1700000000", body)
    assert headers["Gatehouse-Delivery"] == data["delivery_id"]
    assert "Gatehouse-Signature" not in webhook_headers(data, body, "1", None)
    slack = json.loads(slack_body(data))
    assert "obj &lt;b&gt;" in slack["blocks"][0]["text"]["text"]
    mail = email_message(data, config.sinks[1])
    assert mail["To"] == "a@x, b@x" and mail["Message-ID"] == f"<{data['delivery_id']}@gatehouse>"
    # each sink its own id: a receiver of two sinks can tell them apart
    assert payload(config, config.sinks[1], "failed", event)["delivery_id"] != data["delivery_id"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("sinks: [", "is not YAML"),
        ("sinks: []", "sinks"),
        ("sinks: [{id: a, kind: webhook, events: [failed], url: 'http://h'}]", "secret_env"),
        ("sinks: [{id: a, kind: email, events: [failed]}]", "smtp, sender and to"),
        ("sinks: [{id: a, kind: slack, events: [nope], url: 'http://h'}]", "events"),
        ("sinks: [{id: a, kind: slack, events: [failed], url: 'http://h'}]\n"
         "escalation_sinks: [b]", "unknown sinks: b"),
        ("sinks: [{id: a, kind: webhook, events: [failed], url: 'http://h', secret_env: S,"
         " buttons: true}]", "only a slack sink has buttons"),
        ("sinks: [{id: a, kind: slack, events: [failed], url: 'http://h',"
         " signing: standard-webhooks}]", "only a webhook sink takes signing"),
        ("sinks: [{id: a, kind: slack, events: [failed]}]", "either a url"),
        ("sinks: [{id: a, kind: slack, events: [failed], url: 'http://h', bot_token_env: T,"
         " channel: C1}]", "not both"),
        ("sinks: [{id: a, kind: slack, events: [failed], bot_token_env: T}]", "go together"),
        ("sinks: [{id: a, kind: webhook, events: [failed], url: 'http://h', secret_env: S,"
         " bot_token_env: T, channel: C1}]", "only a slack sink takes bot_token_env"),
        ("sinks: [{id: a, kind: slack, events: [failed], bot_token_env: T, channel: C1,"
         " api_url: 'http://h/api'}]", "api_url"),
    ],
)  # fmt: skip
def test_a_bad_notifications_file_is_refused_with_its_reason(
    tmp_path: Path, text: str, problem: str
) -> None:
    file = tmp_path / "n.yaml"
    file.write_text(text)
    with pytest.raises(GatehouseError) as refused:
        load_config(file)
    assert refused.value.code is ErrorCode.CONFIG_INVALID
    assert problem in refused.value.message
    with pytest.raises(GatehouseError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("status", "name", "buttons", "shown"),
    [
        ("waiting_approval", "waiting_approval", True, True),
        ("waiting_approval", "approval_reminder", True, True),
        ("waiting_approval", "waiting_approval", False, False),  # the sink did not ask
        ("failed", "failed", True, False),  # nothing to decide
    ],
)
def test_a_slack_message_has_decision_buttons_only_for_a_waiting_plan(
    status: str, name: str, buttons: bool, shown: bool
) -> None:
    config = NotifyConfig.model_validate(SINKS)
    data = payload(config, config.sinks[0], name, _event("run.phase", {"status": status}))
    blocks = json.loads(slack_body(data, buttons))["blocks"]
    actions = [b for b in blocks if b["type"] == "actions"]
    assert bool(actions) is shown
    if shown:
        values = {e["action_id"]: json.loads(e["value"]) for e in actions[0]["elements"]}
        both = {"run_id": "run_1", "plan_digest": "ab" * 32}
        assert values == {"gatehouse_approve": both, "gatehouse_reject": both}


def test_a_standard_webhook_verifies_with_the_standard_library() -> None:
    config = NotifyConfig.model_validate(SINKS)
    data = payload(config, config.sinks[0], "failed", _event("run.phase", {"status": "failed"}))
    body = json.dumps(data).encode()
    key = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHMtMzItYnl0ZXMhIQ=="
    headers = standard_webhook_headers(data, body, int(time.time()), key)
    assert Webhook(key).verify(body, headers) == data
    assert headers["webhook-id"] == headers["ce-id"] == data["delivery_id"]
    assert headers["ce-type"] == "com.gatehouse.run.failed" and headers["ce-subject"] == "run_1"
    with pytest.raises(Exception, match="too old"):
        Webhook(key).verify(body, standard_webhook_headers(data, body, 1_000_000_000, key))


AT, LATER = "2026-11-27T09:30:12.000Z", "2026-11-27T10:00:00.000Z"


@pytest.mark.parametrize(
    ("why", "by", "at", "detail", "line"),
    [
        ("approved", "bob", AT, None, "Approved by bob, 2026-11-27 09:30 UTC"),
        ("approved", "ann, bob", AT, None, "Approved by ann, bob, 2026-11-27"),
        ("rejected", "<ann>", AT, None, "Rejected by &lt;ann&gt;, 2026-11-27"),
        ("edited", "carol", AT, "run_2", "Edited by carol into run run_2, "),
        ("replaced", None, None, "cd" * 32, "Replaced by a new revision of the plan (cdcdcdcd"),
        ("expired", None, "2000-01-01T00:00:00.000Z", None, "Expired at 2000-01-01 00:00 UTC"),
        ("cancelled", "olga", LATER, None, "cancelled by olga, 2026-11-27 10:00"),
        ("ended", None, LATER, "failed, budget_exceeded",
         "The run ended (failed, budget_exceeded), 2026-11-27 10:00 UTC"),
    ],
)  # fmt: skip
def test_a_closed_slack_message_says_what_happened_who_and_when(
    why: Why, by: str | None, at: str | None, detail: str | None, line: str
) -> None:
    config = NotifyConfig.model_validate(SINKS)
    data = payload(config, config.sinks[0], "waiting_approval",
                   _event("run.phase", {"status": "waiting_approval"}))  # fmt: skip
    posted = json.loads(slack_body(data, buttons=True))
    message = SlackMessage("desk", "C1", "1700000000.000100", "run_1", "ab" * 32, 7,
                           {"text": posted["text"], "blocks": posted["blocks"]})  # fmt: skip
    closing = Closing(message, why, by, at, detail)
    said = closing_line(closing)
    assert line in said
    update = json.loads(json.dumps(slack_update(closing, said)))
    assert (update["channel"], update["ts"], update["event"]) == (
        "C1", "1700000000.000100", "slack_update")  # fmt: skip
    blocks = update["blocks"]  # the buttons gone, the line below what it said
    assert [b["type"] for b in blocks] == ["section", "context"]
    assert blocks[0] == posted["blocks"][0] and blocks[1]["elements"][0]["text"] == said
    assert said in update["text"]
    # one update per message: the same closing gives the same delivery id, another message another
    assert slack_update(closing, said)["delivery_id"] == update["delivery_id"]
    other = Closing(SlackMessage("desk", "C1", "1700000000.000200", "run_1", "ab" * 32, 7, {}), why,
                    by, at, detail)  # fmt: skip
    assert slack_update(other, said)["delivery_id"] != update["delivery_id"]


def test_a_bot_sink_posts_and_updates_through_the_web_api_and_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """slack_sdk's WebClient against a loopback stand-in for Slack's Web API: a post
    answers where the message is; Slack's refusals and an unset token or unreachable
    API are DeliveryErrors naming the cause (the notifier retries those)."""
    with SlackWebApi("xoxb-right", channel_ids={"approvals": "C0APPROVALS"}) as api:
        bot = {"id": "desk", "kind": "slack", "bot_token_env": "GH_TEST_BOT",
               "channel": "approvals", "api_url": api.api_url, "buttons": True,
               "events": ["waiting_approval"]}  # fmt: skip
        config = NotifyConfig.model_validate({"sinks": [bot]})
        sink = config.sinks[0]
        data = payload(config, sink, "waiting_approval",
                       _event("run.phase", {"status": "waiting_approval"}))  # fmt: skip
        monkeypatch.delenv("GH_TEST_BOT", raising=False)
        with pytest.raises(DeliveryError, match="GH_TEST_BOT is not set"):
            send(sink, data)
        monkeypatch.setenv("GH_TEST_BOT", "xoxb-wrong")
        with pytest.raises(DeliveryError, match=r"chat\.postMessage: invalid_auth"):
            send(sink, data)
        monkeypatch.setenv("GH_TEST_BOT", "xoxb-right")
        posted = send(sink, data)
        assert posted is not None and posted.channel == "C0APPROVALS"
        refused, call = api.on("chat.postMessage")  # the wrong token's, then this one
        assert (refused.token, call.token) == ("xoxb-wrong", "xoxb-right")
        assert call.body["channel"] == "approvals" and "gatehouse" not in call.body
        assert [b["type"] for b in call.body["blocks"]] == ["section", "actions"]

        said = {"text": call.body["text"], "blocks": call.body["blocks"]}
        message = SlackMessage("desk", posted.channel, posted.ts, "run_1", "ab" * 32, 7, said)
        closing = Closing(message, "approved", "bob", AT)
        update = slack_update(closing, closing_line(closing))
        api.fail_next("chat.update", "Approved by bob")
        with pytest.raises(DeliveryError, match=r"chat\.update: fatal_error"):
            send(sink, update)
        assert send(sink, update) is None
        assert "Approved by bob" in api.posted[(posted.channel, posted.ts)]["text"]
        gone = update | {"ts": "1.000001"}
        with pytest.raises(DeliveryError, match=r"chat\.update: message_not_found"):
            send(sink, gone)
        unreachable = sink.model_copy(update={"api_url": "http://127.0.0.1:9/api/"})
        with pytest.raises(DeliveryError, match=r"chat\.postMessage: "):
            send(unreachable, data)
