"""Sending one delivery to one sink: an HTTP POST, a Slack Web API call, or an SMTP message.

A delivery counts as delivered when the receiver acknowledged it: a 2xx answer,
Slack's ``ok: true``, or the SMTP server accepting the message for every
recipient. Anything else is a ``DeliveryError`` with a short reason, and the
notifier tries again later. A Slack sink with a bot token posts with
``chat.postMessage`` (the answer names the message: ``Posted``) and updates a
message it posted with ``chat.update`` (a ``slack_update`` delivery); slack_sdk's
errors are translated here, at the boundary.
"""

from __future__ import annotations

import math
import os
import smtplib
import time
from dataclasses import dataclass

import httpx
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from standardwebhooks.webhooks import EmptyWebhookSecretError

from contracts import JsonObject, Sink, canonical_json
from worker.notify.payload import (
    SLACK_UPDATE,
    email_message,
    slack_body,
    slack_message,
    standard_webhook_headers,
    webhook_headers,
)

__all__ = ["DeliveryError", "Posted", "send"]


class DeliveryError(Exception):
    """The receiver did not acknowledge the delivery."""


@dataclass(frozen=True)
class Posted:
    """Where Slack put a message a bot posted: what ``chat.update`` needs later."""

    channel: str
    ts: str
    message: JsonObject  # what was posted (text and blocks), kept for the update


def _secret(sink: Sink) -> bytes | None:
    if sink.secret_env is None:
        return None
    value = os.environ.get(sink.secret_env)
    if not value:
        raise DeliveryError(f"the secret variable {sink.secret_env} is not set")
    return value.encode("utf-8")


def _headers(sink: Sink, data: JsonObject, body: bytes) -> dict[str, str]:
    if sink.signing == "gatehouse":
        return webhook_headers(data, body, str(int(time.time())), _secret(sink))
    secret = _secret(sink) or b""
    try:
        return standard_webhook_headers(data, body, int(time.time()), secret.decode("utf-8"))
    except (ValueError, EmptyWebhookSecretError) as exc:  # not a whsec_ base64 key
        raise DeliveryError(
            f"the secret in {sink.secret_env} is not a Standard Webhooks key (whsec_<base64>)"
        ) from exc


def _post(sink: Sink, data: JsonObject, body: bytes) -> None:
    headers = _headers(sink, data, body)
    try:
        with httpx.Client(timeout=sink.timeout_s, trust_env=False, follow_redirects=False) as c:
            answer = c.post(str(sink.url), content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}"[:300]) from exc
    if not 200 <= answer.status_code < 300:
        raise DeliveryError(f"HTTP {answer.status_code}")


def _mail(sink: Sink, data: JsonObject) -> None:
    smtp = sink.smtp
    if smtp is None:  # the config's validator makes this impossible
        raise DeliveryError("no smtp server")
    message = email_message(data, sink)
    try:
        with smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout_s) as server:
            if smtp.starttls:
                server.starttls()
            if smtp.username_env is not None:
                server.login(
                    os.environ.get(smtp.username_env, ""),
                    os.environ.get(smtp.password_env or "", ""),
                )
            refused = server.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}"[:300]) from exc
    if refused:
        raise DeliveryError(f"refused recipients: {', '.join(sorted(refused))}"[:300])


def _web(sink: Sink) -> WebClient:
    name = sink.bot_token_env or ""
    token = os.environ.get(name)
    if not token:
        raise DeliveryError(f"the bot token variable {name} is not set")
    # slack_sdk's timeout is whole seconds
    return WebClient(token=token, base_url=sink.api_url, timeout=max(1, math.ceil(sink.timeout_s)))


def _slack_call(sink: Sink, method: str, fields: JsonObject) -> JsonObject:
    """One Web API call; Slack's answer, or DeliveryError naming Slack's error."""
    try:
        answer = _web(sink).api_call(method, json=fields)
    except SlackApiError as exc:  # ok: false, or not a 200
        error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
        status = exc.response.status_code
        raise DeliveryError(f"{method}: {error or f'HTTP {status}'}"[:300]) from exc
    except (SlackClientError, OSError, ValueError) as exc:  # unreachable, timed out, not JSON
        raise DeliveryError(f"{method}: {type(exc).__name__}: {exc}"[:300]) from exc
    data = answer.data
    if not isinstance(data, dict):
        raise DeliveryError(f"{method}: Slack's answer is not a JSON object")
    return data


def _bot(sink: Sink, data: JsonObject) -> Posted | None:
    if data.get("event") == SLACK_UPDATE:
        fields = {k: data[k] for k in ("channel", "ts", "text", "blocks")}
        _slack_call(sink, "chat.update", fields)
        return None
    message = slack_message(data, sink.buttons)
    answer = _slack_call(sink, "chat.postMessage", {"channel": sink.channel or "", **message})
    channel, ts = answer.get("channel"), answer.get("ts")
    if not isinstance(channel, str) or not isinstance(ts, str):
        raise DeliveryError("chat.postMessage: Slack's answer names no channel and ts")
    return Posted(channel, ts, message)


def send(sink: Sink, data: JsonObject) -> Posted | None:
    """Send one delivery; where Slack put the message, for a bot's post."""
    if sink.kind == "webhook":
        _post(sink, data, canonical_json(data).encode("utf-8"))
    elif sink.kind == "slack" and sink.bot:
        return _bot(sink, data)
    elif sink.kind == "slack":
        _post(sink, data, slack_body(data, sink.buttons))
    else:
        _mail(sink, data)
    return None
