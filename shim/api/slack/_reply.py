"""What a decided message becomes, and sending it to the click's ``response_url``.

A recorded decision replaces the message for everyone in the channel: its text
and sections stay, the buttons go, and a line says who decided and when. So does
a refusal that holds for anyone (the plan expired, was decided already or
replaced, the run ended): the buttons go and the line says why. A refusal of
this person only (their own run, no approver role) is shown to them alone
(``ephemeral``), and the buttons stay for others.
Slack's ``response_url`` is only ever one of the configured hosts
(``SlackDoor.may_reply_to``): a signed request cannot make the shim post elsewhere.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    QuorumView,
    closed_slack_message,
    escaped,
    escaped_strings,
)
from shim.api.slack._config import SlackDoor

__all__ = [
    "closed_message",
    "decided_message",
    "for_everyone",
    "refusal_message",
    "send_reply",
    "short_of_quorum",
]

_log = logging.getLogger("gatehouse.shim.slack")
_TIMEOUT_S = 10.0


# Refusals that hold whoever clicks: the message's plan can no longer be decided.
_FOR_EVERYONE = frozenset({
    ErrorCode.APPROVAL_TIMEOUT, ErrorCode.ALREADY_DECIDED, ErrorCode.STALE_PLAN_DIGEST,
    ErrorCode.RUN_NOT_AWAITING_APPROVAL, ErrorCode.RUN_CANCELLED, ErrorCode.RUN_NOT_FOUND,
})  # fmt: skip


def for_everyone(exc: GatehouseError) -> bool:
    return exc.code in _FOR_EVERYONE


def _when() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _replaced(original: JsonObject | None, run_id: str, line: str) -> JsonObject:
    """The message without its buttons, ``line`` added below what it said; every
    text in it with its hidden characters escaped (``contracts.escaped``): a name or
    a message may carry them, and so may the message as Slack sent it back."""
    return {
        "replace_original": True,
        **escaped_strings(closed_slack_message(original, run_id, line)),
    }


def decided_message(
    original: JsonObject | None, run_id: str, decision: str, decided_by: str, slack_user: str
) -> JsonObject:
    """The message with its buttons replaced by who decided."""
    line = f"{decision.capitalize()} by {decided_by} (<@{slack_user}>), {_when()}"
    return _replaced(original, run_id, line)


def closed_message(original: JsonObject | None, run_id: str, exc: GatehouseError) -> JsonObject:
    """The message with its buttons replaced by why nobody can decide on it now."""
    return _replaced(original, run_id, f"No longer open ({exc.code.value}): {exc.message}")


def refusal_message(exc: GatehouseError) -> JsonObject:
    """Told only to the person who clicked; the message and its buttons stay."""
    return {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": escaped(f"Gatehouse did not take your decision ({exc.code.value}): {exc.message}"),
    }


def short_of_quorum(quorum: QuorumView) -> JsonObject:
    """Told to the approver: counted, and the plan waits for more (the buttons stay)."""
    have = len(quorum.approved_by)
    return {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": escaped(
            f"Your approval is counted ({have} of {quorum.needed}): the plan waits for"
            f" {quorum.missing} more approver(s). Approved so far by"
            f" {', '.join(quorum.approved_by)}."
        ),
    }


async def send_reply(door: SlackDoor, response_url: str, message: JsonObject) -> None:
    """Post ``message`` to the click's ``response_url``; a failure is logged (the
    decision stands whatever Slack's message shows)."""
    if not door.may_reply_to(response_url):
        _log.warning("not updating the Slack message: %.200r is not a response host", response_url)
        return
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT_S, trust_env=False) as client:
            answer = await client.post(response_url, json=message)
    except httpx.HTTPError as exc:
        _log.warning("the Slack message was not updated: %s", type(exc).__name__)
        return
    if not answer.is_success:
        _log.warning("the Slack message was not updated: HTTP %d", answer.status_code)
