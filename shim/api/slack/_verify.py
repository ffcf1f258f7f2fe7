"""A Slack request is Slack's, recent, and new: or it is refused with a code.

Slack signs ``v0:<timestamp>:<body>`` with the app's signing secret
(``X-Slack-Signature``, ``X-Slack-Request-Timestamp``); slack_sdk's verifier
checks it. The timestamp is judged first, so a stale request is told apart
from a forged one; a signature already taken is a replay (``ledger.slack_requests``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from contracts import ErrorCode, GatehouseError
from ledger import Database, slack_requests
from shim.api.slack._config import SlackDoor

__all__ = ["MAX_SKEW_S", "verify"]

MAX_SKEW_S = 5 * 60  # Slack's own rule for how old (or new) a request may be


def verify(door: SlackDoor, db: Database, body: bytes, headers: Mapping[str, str]) -> None:
    stamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12) or not signature:
        raise GatehouseError(
            ErrorCode.SLACK_SIGNATURE_INVALID,
            "send X-Slack-Request-Timestamp and X-Slack-Signature as Slack does",
        )
    skew = abs(time.time() - int(stamp))
    if skew > MAX_SKEW_S:
        raise GatehouseError(
            ErrorCode.SLACK_REQUEST_STALE,
            f"the request is timestamped {skew:.0f} s from now; at most {MAX_SKEW_S} s is taken",
            {"timestamp": stamp},
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None  # Slack sends UTF-8: whatever else this is, it is not Slack's
    if text is None or not door.verifier.is_valid(text, stamp, signature):
        raise GatehouseError(
            ErrorCode.SLACK_SIGNATURE_INVALID,
            "the request's signature does not match the Slack app's signing secret",
        )
    with db.engine.begin() as conn:
        first = slack_requests.first_sight(conn, signature)
    if not first:
        raise GatehouseError(
            ErrorCode.SLACK_REQUEST_REPLAYED, "this signed request was already taken"
        )
