"""Sending one delivery to one sink: an HTTP POST or an SMTP message.

A delivery counts as delivered when the receiver acknowledged it: a 2xx answer,
or the SMTP server accepting the message for every recipient. Anything else is
a ``DeliveryError`` with a short reason, and the notifier tries again later.
"""

from __future__ import annotations

import os
import smtplib
import time

import httpx
from standardwebhooks.webhooks import EmptyWebhookSecretError

from contracts import JsonObject, Sink, canonical_json
from worker.notify.payload import (
    email_message,
    slack_body,
    standard_webhook_headers,
    webhook_headers,
)

__all__ = ["DeliveryError", "send"]


class DeliveryError(Exception):
    """The receiver did not acknowledge the delivery."""


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


def send(sink: Sink, data: JsonObject) -> None:
    if sink.kind == "webhook":
        _post(sink, data, canonical_json(data).encode("utf-8"))
    elif sink.kind == "slack":
        _post(sink, data, slack_body(data, sink.buttons))
    else:
        _mail(sink, data)
