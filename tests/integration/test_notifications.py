"""Approvers are told: webhooks (HMAC-signed), Slack-compatible messages and email,
delivered at least once from durable rows, with retries, never in a run's way.

Receivers run on loopback: an HTTP endpoint that refuses its first request, and
an aiosmtpd server. One test kills a worker (a real process) while a receiver
holds its request, and another worker delivers the same delivery id again."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import JsonObject, NotifyConfig
from ledger import migrate, open_database
from ledger.notifications import add_delivery, deliveries_of
from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.receivers import MailReceiver, WebhookReceiver
from tests.support.stack import BACKENDS, Stack, drop_database, fresh_database_url, running_stack
from worker.notify import Notifier

SECRET = "s3cret-for-tests"
ENV = "GATEHOUSE_TEST_WEBHOOK_SECRET"


def _config(hook: WebhookReceiver, mail: MailReceiver, **extra: Any) -> dict[str, Any]:
    return {
        "dashboard_url": "http://gatehouse.test:8000",
        "sinks": [
            {"id": "ops", "kind": "webhook", "url": f"{hook.url}/ops", "secret_env": ENV,
             "events": ["waiting_approval", "finished", "failed", "security_event"]},
            {"id": "chat", "kind": "slack", "url": f"{hook.url}/slack",
             "events": ["waiting_approval"]},
            {"id": "mail", "kind": "email", "events": ["waiting_approval", "finished"],
             "smtp": {"host": "127.0.0.1", "port": mail.port}, "sender": "gh@test.example",
             "to": ["approvers@test.example"]},
            {"id": "oncall", "kind": "webhook", "url": f"{hook.url}/oncall", "secret_env": ENV,
             "events": ["needs_operator"]},
        ],
        "escalation_sinks": ["oncall"],
        "backoff_s": 0.2,
        "poll_s": 0.1,
        **extra,
    }  # fmt: skip


@pytest.fixture(scope="module", params=BACKENDS)
def told(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, WebhookReceiver, MailReceiver, NotifyConfig]]:
    require_backend(request.param)
    tmp = tmp_path_factory.mktemp(f"notify-{request.param}")
    os.environ[ENV] = SECRET
    with WebhookReceiver() as hook, MailReceiver() as mail:
        config = _config(hook, mail)
        file = tmp / "notifications.yaml"
        file.write_text(json.dumps(config))  # JSON is YAML
        env = {"GATEHOUSE_NOTIFICATIONS": str(file)}
        with running_stack(request.param, tmp, worker_env=env) as stack:
            yield stack, hook, mail, NotifyConfig.model_validate(config)


def _check_signature(headers: dict[str, str], body: bytes) -> None:
    stamp = headers["gatehouse-timestamp"]
    assert abs(time.time() - int(stamp)) < 60
    mac = hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["gatehouse-signature"], f"v1={mac}")


def test_every_sink_is_told_with_retries_and_signatures(
    told: tuple[Stack, WebhookReceiver, MailReceiver, NotifyConfig],
) -> None:
    stack, hook, mail, _ = told
    plan = noop_plan(1)
    hook.fail_next("/ops", "tell <them>")  # the run's first delivery there is answered 500
    r = stack.submit({"recipe": "echo", "objective": "tell <them>", "mode": "run-plan",
                      "plan": plan})  # fmt: skip
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    ops = hook.wait_for("/ops", 2, about=run_id)  # answered 500 the first time, then sent again
    assert ops[0].headers["gatehouse-delivery"] == ops[1].headers["gatehouse-delivery"]
    assert ops[0].body == ops[1].body
    for got in ops:
        _check_signature(got.headers, got.body)
    body = json.loads(ops[1].body)
    assert body["event"] == "waiting_approval" and body["run_id"] == run_id
    assert body["delivery_id"] == ops[1].headers["gatehouse-delivery"]
    assert body["links"]["dashboard"] == f"http://gatehouse.test:8000/dashboard/runs/{run_id}"
    assert body["plan_digest"] == digest_of_plan(plan) and body["objective"] == "tell <them>"
    slack = json.loads(hook.wait_for("/slack", 1, about=run_id)[0].body)
    assert "waiting approval" in slack["text"]
    assert "tell &lt;them&gt;" in slack["blocks"][0]["text"]["text"]
    assert f"/dashboard/runs/{run_id}|" in slack["blocks"][0]["text"]["text"]
    letter = mail.wait_for(1, about=run_id)[0]
    assert run_id in str(letter["Subject"]) and letter["To"] == "approvers@test.example"
    text = letter.get_payload(decode=True)
    assert isinstance(text, bytes) and f"/dashboard/runs/{run_id}".encode() in text
    delivery = str(letter["X-Gatehouse-Delivery"])

    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    assert ok.status_code == 200, ok.text
    stack.wait(run_id, {"succeeded"})
    finished = json.loads(hook.wait_for("/ops", 3, about=run_id)[2].body)
    assert finished["event"] == "finished" and finished["status"] == "succeeded"
    letters = mail.wait_for(2, about=run_id)
    assert {str(m["X-Gatehouse-Event"]) for m in letters} == {"waiting_approval", "finished"}
    assert str(letters[0]["X-Gatehouse-Delivery"]) == delivery
    deadline = time.monotonic() + 20
    rows = stack.sql("SELECT status, attempts FROM notification_deliveries WHERE run_id = :r",
                     r=run_id)  # fmt: skip
    while any(s != "delivered" for s, _ in rows) and time.monotonic() < deadline:
        time.sleep(0.1)
        rows = stack.sql("SELECT status, attempts FROM notification_deliveries WHERE run_id = :r",
                         r=run_id)  # fmt: skip
    assert sorted(s for s, _ in rows) == ["delivered"] * 5  # ops 2, chat 1, mail 2
    assert max(int(a) for _, a in rows) == 2
    pending = stack.sql("SELECT COUNT(*) FROM run_events WHERE notify_pending = 1")
    assert pending[0][0] == 0


def _waiting(stack: Stack, objective: str) -> tuple[str, dict[str, Any]]:
    """A run submitted and waiting at its plan card: its id and plan."""
    plan = noop_plan(1)
    r = stack.submit({"recipe": "echo", "objective": objective, "mode": "run-plan", "plan": plan})
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id, plan


def test_an_approval_waiting_too_long_is_escalated_once(
    told: tuple[Stack, WebhookReceiver, MailReceiver, NotifyConfig],
) -> None:
    stack, hook, _, config = told
    run_id, plan = _waiting(stack, "slow")
    db = open_database(stack.database_url)
    try:  # a notifier whose profiles escalate at once (the shipped ones never do)
        eager = Notifier(db, config, "test-escalator", escalate_after=lambda _: 0.0)
        assert eager.escalate() == 1
        assert eager.escalate() == 0  # once per wait
        deadline = time.monotonic() + 20
        while not [r for r in hook.on("/oncall") if run_id in r.body.decode()]:
            eager.deliver()
            assert time.monotonic() < deadline, "the escalation was not delivered"
            time.sleep(0.1)
    finally:
        db.dispose()
    got = [json.loads(r.body) for r in hook.on("/oncall") if run_id in r.body.decode()]
    assert got[0]["event"] == "approval_escalated" and "waiting_since" in got[0]
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    stack.wait(run_id, {"rejected"})


def test_an_approval_waiting_is_reminded_every_interval(
    told: tuple[Stack, WebhookReceiver, MailReceiver, NotifyConfig],
) -> None:
    stack, hook, _, config = told
    run_id, plan = _waiting(stack, "remind")
    # the on-call sink asks for reminders too (same id and address as the worker's, so
    # either notifier may send what the other wrote)
    sinks = [
        s.model_copy(update={"events": [*s.events, "approval_reminder"]}) if s.id == "oncall" else s
        for s in config.sinks
    ]
    reminding = config.model_copy(update={"sinks": sinks})

    def reminders() -> list[dict[str, Any]]:
        got = [json.loads(r.body) for r in hook.on("/oncall") if run_id in r.body.decode()]
        return [g for g in got if g["event"] == "approval_reminder"]

    db = open_database(stack.database_url)
    try:  # profiles that remind every 0.3 s, and every hour (the shipped ones never do)
        eager = Notifier(db, reminding, "test-reminder", remind_every=lambda _: 0.3)
        hourly = Notifier(db, reminding, "test-hourly", remind_every=lambda _: 3600.0)
        assert hourly.remind() == 0  # not an hour yet
        deadline = time.monotonic() + 20
        while len({g["reminder"] for g in reminders()}) < 2:
            eager.remind()
            eager.deliver()
            assert time.monotonic() < deadline, "no second reminder was delivered"
            time.sleep(0.1)
        got = reminders()
        # each reminder its own delivery, numbered by how many intervals the wait lasted
        ids = {g["reminder"]: g["delivery_id"] for g in got}
        assert len(set(ids.values())) == len(ids) and min(ids) >= 1
        assert all(g["waiting_since"] and g["plan_digest"] for g in got)
        stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest_of_plan(plan)})
        stack.wait(run_id, {"rejected"})
        time.sleep(0.4)
        assert eager.remind() == 0  # decided: no more reminders
    finally:
        db.dispose()


def test_an_approval_about_to_expire_is_warned_once_with_its_deadline(
    told: tuple[Stack, WebhookReceiver, MailReceiver, NotifyConfig],
) -> None:
    stack, hook, _, config = told
    run_id, plan = _waiting(stack, "expiring")
    deadline = time.monotonic() + 20
    while not stack.sql(
        "SELECT 1 FROM runs WHERE run_id = :r AND parked_until IS NOT NULL", r=run_id
    ):
        assert time.monotonic() < deadline, "the run never parked"
        time.sleep(0.05)
    [(expires_at,)] = stack.sql("SELECT parked_until FROM runs WHERE run_id = :r", r=run_id)
    sinks = [
        s.model_copy(update={"events": [*s.events, "approval_expiring"]}) if s.id == "oncall" else s
        for s in config.sinks
    ]
    warning = config.model_copy(update={"sinks": sinks})
    db = open_database(stack.database_url)
    try:  # the shipped profile waits a day: warn a minute before it, then two days before
        late = Notifier(db, warning, "test-late", warn_before=lambda _: 60.0)
        early = Notifier(db, warning, "test-early", warn_before=lambda _: 2 * 86400.0)
        assert late.warn() == 0  # a day is left, not a minute
        assert early.warn() == 1 and early.warn() == 0  # once per wait
        while not [r for r in hook.on("/oncall") if b"approval_expiring" in r.body
                   and run_id.encode() in r.body]:  # fmt: skip
            early.deliver()
            assert time.monotonic() < deadline + 20, "the warning was not delivered"
            time.sleep(0.1)
    finally:
        db.dispose()
    [got] = [json.loads(r.body) for r in hook.on("/oncall") if b"approval_expiring" in r.body
             and run_id.encode() in r.body]  # fmt: skip
    assert got["expires_at"] == expires_at and got["plan_digest"] == digest_of_plan(plan)
    stack.client.post(f"/reject/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    stack.wait(run_id, {"rejected"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_killed_mid_delivery_is_followed_by_the_same_delivery(
    backend: str, tmp_path: Path
) -> None:
    require_backend(backend)
    url = fresh_database_url(backend, tmp_path)
    db = open_database(url)
    migrate(db)
    with WebhookReceiver() as hook, MailReceiver() as mail:
        config = _config(hook, mail, lease_s=2)
        file = tmp_path / "notifications.json"
        file.write_text(json.dumps(config))
        delivery: JsonObject = {
            "delivery_id": "dlv_" + "a" * 32,
            "event": "failed",
            "run_id": "run_x",
        }
        with db.engine.begin() as conn:
            add_delivery(conn, run_id="run_x", seq=1, event="failed", sink_id="ops",
                         payload=delivery)  # fmt: skip
        env = {**os.environ, ENV: SECRET, "GATEHOUSE_DATABASE_URL": url,
               "GATEHOUSE_NOTIFICATIONS": str(file),
               "GATEHOUSE_WORKSPACE_ROOT": str(tmp_path / "ws")}  # fmt: skip
        hook.hold.set()  # take the request, never answer it
        first = subprocess.Popen([sys.executable, "-m", "worker"], env={**env,
                                 "GATEHOUSE_EXECUTOR_ID": "doomed"})  # fmt: skip
        try:
            hook.wait_for("/ops", 1, timeout=60)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        hook.hold.clear()
        hook.release.set()
        second = subprocess.Popen([sys.executable, "-m", "worker"], env={**env,
                                  "GATEHOUSE_EXECUTOR_ID": "heir"})  # fmt: skip
        try:
            sent = hook.wait_for("/ops", 2, timeout=60)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with db.engine.connect() as conn:
                    rows = deliveries_of(conn, "run_x")
                if rows[0].status == "delivered":
                    break
                time.sleep(0.1)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    db.dispose()
    drop_database(url)
    assert [r.headers["gatehouse-delivery"] for r in sent[:2]] == ["dlv_" + "a" * 32] * 2
    assert sent[0].body == sent[1].body
    assert rows[0].status == "delivered"
