"""What a notification says, and its signature.

The payload is fixed when the event is fanned out and stored with the
delivery, so every retry sends the same body (only the timestamp header is
new). Webhooks are signed: ``Gatehouse-Signature: v1=<hex HMAC-SHA256 of
"<Gatehouse-Timestamp>.<body>" under the sink's secret>``, so a receiver can
check the sender and refuse a replayed request whose timestamp is old;
``Gatehouse-Delivery`` is the id to drop repeats by. A webhook sink with
``signing: standard-webhooks`` is signed as Standard Webhooks specifies
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``, by the
``standardwebhooks`` library) and carries CloudEvents' attributes as ``ce-``
headers (binary content mode), so a receiver's stock verifier and event router
take it as it is.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from email.message import EmailMessage

from standardwebhooks import Webhook

from contracts import (
    APPROVE_ACTION,
    REJECT_ACTION,
    JsonObject,
    JsonValue,
    NotifyConfig,
    RunStatus,
    Sink,
    canonical_json,
    closed_slack_message,
    decision_button_value,
    escaped,
    escaped_strings,
)
from ledger.notifications import PendingEvent, WaitingApproval, delivery_id
from ledger.slack_messages import Closing

__all__ = [
    "SLACK_UPDATE",
    "closing_line",
    "decidable",
    "email_message",
    "event_name",
    "payload",
    "signature",
    "slack_body",
    "slack_message",
    "slack_update",
    "standard_webhook_headers",
    "webhook_headers",
]

# The event of a delivery that updates a bot's Slack message (not one a sink asks for).
SLACK_UPDATE = "slack_update"

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
    if isinstance(event, WaitingApproval) and event.expires_at is not None:
        out["expires_at"] = event.expires_at
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


def standard_webhook_headers(
    data: JsonObject, body: bytes, timestamp: int, secret: str
) -> dict[str, str]:
    """Standard Webhooks' three headers (``secret``: a ``whsec_`` base64 key) and
    CloudEvents' required and run attributes; ``timestamp``: Unix seconds."""
    at = datetime.fromtimestamp(timestamp, UTC)
    msg_id = str(data["delivery_id"])
    links = data["links"]
    source = str(links["api"]) if isinstance(links, dict) else "gatehouse"
    return {
        "Content-Type": "application/json",
        "User-Agent": "gatehouse-notifier/1",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": Webhook(secret).sign(msg_id, at, body.decode("utf-8")),
        "ce-specversion": "1.0",
        "ce-id": msg_id,
        "ce-source": source,
        "ce-type": f"com.gatehouse.run.{data['event']}",
        "ce-subject": str(data["run_id"]),
        "ce-time": str(data["at"]),
    }


def _line(data: JsonObject) -> str:
    event = str(data["event"]).replace("_", " ")
    code = f" ({data['error_code']})" if data.get("error_code") else ""
    return f"Gatehouse: run {data['run_id']} ({data['recipe']}) {event}{code}"


def _slack_escape(text: JsonValue) -> str:
    """Text for Slack's mrkdwn: its markup characters as entities, and every
    character the one allowlist refuses as its escape (``contracts.escaped``)."""
    marked = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped(marked)


# The events a decision button is offered with: the plan is waiting for one.
_DECIDABLE = ("waiting_approval", "approval_reminder", "approval_escalated", "approval_expiring")


def _buttons(data: JsonObject) -> JsonObject:
    """Approve and Reject, each carrying the run and the digest of the plan the
    message announces (``contracts.decision_button_value``)."""
    value = decision_button_value(str(data["run_id"]), str(data["plan_digest"]))
    confirm: JsonObject = {
        "title": {"type": "plain_text", "text": "Approve this plan?"},
        "text": {"type": "mrkdwn", "text": (
            f"Its steps run as planned (digest `{str(data['plan_digest'])[:12]}`).")},
        "confirm": {"type": "plain_text", "text": "Approve"},
        "deny": {"type": "plain_text", "text": "Not yet"},
    }  # fmt: skip
    return {
        "type": "actions",
        "block_id": "gatehouse_decision",
        "elements": [
            {"type": "button", "action_id": APPROVE_ACTION, "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": "Approve"}, "confirm": confirm},
            {"type": "button", "action_id": REJECT_ACTION, "style": "danger", "value": value,
             "text": {"type": "plain_text", "text": "Reject"}},
        ],
    }  # fmt: skip


def slack_message(data: JsonObject, buttons: bool = False) -> JsonObject:
    """A Slack message: text plus one section with the link, and with ``buttons``
    Approve and Reject when the plan is waiting for a decision."""
    links = data["links"]
    link = str(links["dashboard"]) if isinstance(links, dict) else ""
    text = _slack_escape(_line(data))
    lines = [
        f"*{text}*",
        f"Objective: {_slack_escape(data.get('objective'))}",
        f"Submitted by: {_slack_escape(data.get('submitted_by'))}",
    ]
    if data.get("expires_at"):
        lines.append(f"Expires at: {_slack_escape(data['expires_at'])} (then it is denied)")
    lines.append(f"<{link}|Open the run in the dashboard>")
    blocks: list[JsonValue] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
    ]  # fmt: skip
    if buttons and decidable(data):
        blocks.append(_buttons(data))
    return {"text": text, "blocks": blocks}


def decidable(data: JsonObject) -> bool:
    """Whether the notification announces a plan waiting for a decision."""
    return data.get("event") in _DECIDABLE and bool(data.get("plan_digest"))


def slack_body(data: JsonObject, buttons: bool = False) -> bytes:
    """An incoming webhook's body: the Slack message, and the notification itself."""
    return canonical_json({**slack_message(data, buttons), "gatehouse": data}).encode("utf-8")


def _human(at: str | None) -> str:
    if at is None:
        return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    when = datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def closing_line(closing: Closing) -> str:
    """What a closed message says below what it said: what happened, who, when."""
    who, when = _slack_escape(closing.by), _human(closing.at)
    detail = _slack_escape(closing.detail)
    match closing.why:
        case "approved":
            return f"Approved by {who}, {when}"
        case "rejected":
            return f"Rejected by {who}, {when}"
        case "edited":
            return f"Edited by {who} into run {detail}, {when}: the edited plan is decided there"
        case "replaced":
            return (
                f"Replaced by a new revision of the plan ({detail[:12]}): this one can no"
                " longer be decided"
            )
        case "expired":
            return f"Expired at {when} with no decision: denied"
        case "cancelled":
            return f"The run was cancelled by {who}, {when}"
        case "ended":
            return f"The run ended ({detail}), {when}: this plan can no longer be decided"


def slack_update(closing: Closing, line: str) -> JsonObject:
    """The delivery that replaces a bot's message about a plan once it closed: what it
    said, the buttons gone, ``line`` below (``chat.update``)."""
    message = closing.message
    return {
        "delivery_id": delivery_id(
            message.run_id,
            message.seq,
            f"{SLACK_UPDATE}#{message.channel}:{message.ts}",
            message.sink_id,
        ),
        "event": SLACK_UPDATE,
        "run_id": message.run_id,
        "plan_digest": message.plan_digest,
        "why": closing.why,
        "channel": message.channel,
        "ts": message.ts,
        # a message stored before the allowlist grew is escaped as it is sent again
        **escaped_strings(closed_slack_message(message.message, message.run_id, line)),
    }


def email_message(data: JsonObject, sink: Sink) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = escaped(_line(data), keep="")  # one line: a header cannot break
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
    # an email is read by a person too: what the one allowlist refuses is escaped
    msg.set_content("\n".join(escaped(line) for line in lines))
    return msg
