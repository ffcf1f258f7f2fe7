"""What a notification says, and its signature.

The payload is fixed when the event is fanned out and stored with the
delivery, so every retry sends the same body (only the timestamp header is
new). Webhooks are signed: ``Gatehouse-Signature: v1=<hex HMAC-SHA256 of
"<Gatehouse-Timestamp>.<body>" under the sink's secret>``, so a receiver can
check the sender and refuse a replayed request whose timestamp is old;
``Gatehouse-Delivery`` is the id to drop repeats by.
"""

from __future__ import annotations

import hashlib
import hmac
from email.message import EmailMessage

from contracts import JsonObject, JsonValue, NotifyConfig, RunStatus, Sink, canonical_json
from ledger.notifications import PendingEvent, WaitingApproval, delivery_id

__all__ = ["email_message", "event_name", "payload", "signature", "slack_body", "webhook_headers"]

_FINISHED = {RunStatus.SUCCEEDED, RunStatus.PLANNED, RunStatus.REJECTED, RunStatus.CANCELLED}


def event_name(event: PendingEvent) -> str | None:
    """What a stream event announces, if anything a sink can ask for."""
    if event.kind == "episode":
        kind = str(event.body.get("episode_type", ""))
        return "security_event" if kind.startswith("security_event") else None
    if event.kind != "run.phase":
        return None
    try:
        status = RunStatus(str(event.body.get("status")))
    except ValueError:
        return None
    if status in (RunStatus.WAITING_APPROVAL, RunStatus.NEEDS_OPERATOR, RunStatus.FAILED):
        return status.value
    return "finished" if status in _FINISHED else None


def payload(
    config: NotifyConfig,
    sink: Sink,
    name: str,
    event: PendingEvent | WaitingApproval,
    nth: int | None = None,
) -> JsonObject:
    """What ``sink`` is sent about ``event``; ``nth``: the n-th of a repeated
    announcement (a reminder), which is a delivery of its own."""
    base = config.dashboard_url.rstrip("/")
    body: JsonObject = {}
    if isinstance(event, PendingEvent):
        seq, at, body = event.seq, event.at, event.body
    else:
        seq, at = event.seq, event.since
    details: JsonObject = {
        k: v for k, v in body.items() if k in ("status", "phase", "error_code", "episode_id")
    }
    out: JsonObject = {
        "delivery_id": delivery_id(
            event.run_id, seq, name if nth is None else f"{name}#{nth}", sink.id
        ),
        "event": name,
        "run_id": event.run_id,
        "seq": seq,
        "at": at,
        "recipe": event.recipe,
        "objective": event.objective,
        "submitted_by": event.submitted_by,
        "plan_digest": event.plan_digest,
        **details,
        "links": {
            "dashboard": f"{base}/dashboard/runs/{event.run_id}",
            "api": f"{base}/runs/{event.run_id}",
        },
    }
    if isinstance(event, WaitingApproval):
        out["waiting_since"] = event.since
    if nth is not None:
        out["reminder"] = nth
    return out


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def webhook_headers(
    data: JsonObject, body: bytes, timestamp: str, secret: bytes | None
) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "gatehouse-notifier/1",
        "Gatehouse-Delivery": str(data["delivery_id"]),
        "Gatehouse-Event": str(data["event"]),
        "Gatehouse-Timestamp": timestamp,
    }
    if secret is not None:
        headers["Gatehouse-Signature"] = signature(secret, timestamp, body)
    return headers


def _line(data: JsonObject) -> str:
    event = str(data["event"]).replace("_", " ")
    code = f" ({data['error_code']})" if data.get("error_code") else ""
    return f"Gatehouse: run {data['run_id']} ({data['recipe']}) {event}{code}"


def _slack_escape(text: JsonValue) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(data: JsonObject) -> bytes:
    """A Slack incoming-webhook message: text plus one section with the link."""
    links = data["links"]
    link = str(links["dashboard"]) if isinstance(links, dict) else ""
    text = _slack_escape(_line(data))
    message: JsonObject = {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": (
                f"*{text}*\nObjective: {_slack_escape(data.get('objective'))}\n"
                f"<{link}|Open the run in the dashboard>")}},
        ],
        "gatehouse": data,
    }  # fmt: skip
    return canonical_json(message).encode("utf-8")


def email_message(data: JsonObject, sink: Sink) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = _line(data)
    msg["From"] = sink.sender or ""
    msg["To"] = ", ".join(sink.to)
    msg["Message-ID"] = f"<{data['delivery_id']}@gatehouse>"
    msg["X-Gatehouse-Delivery"] = str(data["delivery_id"])
    msg["X-Gatehouse-Event"] = str(data["event"])
    links = data["links"]
    link = str(links["dashboard"]) if isinstance(links, dict) else ""
    lines = [
        _line(data),
        "",
        f"Objective: {data.get('objective')}",
        f"Submitted by: {data.get('submitted_by')}",
        f"Plan digest: {data.get('plan_digest') or '(none yet)'}",
        "",
        f"Open it (and decide on its plan card): {link}",
        "",
        f"Delivery {data['delivery_id']}",
    ]
    msg.set_content("\n".join(lines))
    return msg
