"""Decisions from Slack: the Slack file (``GATEHOUSE_SLACK``, YAML or JSON) and
what a decision button carries.

Example::

    signing_secret_env: GATEHOUSE_SLACK_SIGNING_SECRET   # the Slack app's signing secret
    team_id: T0123ABCD            # optional: only requests from this workspace
    users:                        # Slack user id -> Gatehouse identity (tokens file)
      U0123ABCD: bob
      U0456EFGH: carol
    response_hosts: [hooks.slack.com]   # where message updates may be sent (default)

A Slack user decides as the Gatehouse identity it is mapped to, with the roles
that identity's tokens carry now: an unmapped user, or one whose identity has no
token with the approver role left, is refused. The secret is never in the file.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from contracts._base import Closed, Digest, Identifier
from contracts._json import JsonObject, JsonValue, canonical_json

__all__ = [
    "APPROVE_ACTION",
    "DECISION_ACTIONS",
    "REJECT_ACTION",
    "DecisionButton",
    "SlackConfig",
    "SlackUserId",
    "closed_slack_message",
    "decision_button_value",
]

# The ``action_id`` of the two buttons a waiting plan's Slack message carries.
APPROVE_ACTION = "gatehouse_approve"
REJECT_ACTION = "gatehouse_reject"
DECISION_ACTIONS = (APPROVE_ACTION, REJECT_ACTION)

# Slack's user and workspace ids: an upper-case letter, then upper-case letters and digits.
SlackUserId = Annotated[str, StringConstraints(pattern=r"^[UW][A-Z0-9]{2,30}$")]
_Host = Annotated[str, StringConstraints(pattern=r"^[a-z0-9.-]{1,253}(:[0-9]{1,5})?$")]


class SlackConfig(Closed):
    signing_secret_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")
    team_id: str | None = Field(default=None, pattern=r"^T[A-Z0-9]{2,30}$")
    users: dict[SlackUserId, Identifier] = Field(min_length=1)
    # Slack sends a response_url with each click; Gatehouse posts the updated message
    # there only when its host is one of these (https, unless the host is loopback).
    response_hosts: list[_Host] = Field(default_factory=lambda: ["hooks.slack.com"], min_length=1)


class DecisionButton(Closed):
    run_id: str = Field(max_length=64)
    plan_digest: Digest


def decision_button_value(run_id: str, plan_digest: str) -> str:
    """What a decision button carries back: the run and the digest of the plan the
    message showed, so a click decides on that plan and no other."""
    return canonical_json(DecisionButton(run_id=run_id, plan_digest=plan_digest).model_dump())


def closed_slack_message(original: JsonObject | None, run_id: str, line: str) -> JsonObject:
    """A message about a plan once nobody can decide on it: what it said (``original``:
    its text and blocks), its buttons gone, ``line`` below. The same whether the shim
    answers a click or a worker's bot updates the message it posted."""
    text = f"Gatehouse: run {run_id}"
    kept: list[JsonValue] = []
    if original is not None:
        text = str(original.get("text") or text)
        blocks = original.get("blocks")
        if isinstance(blocks, list):
            kept = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "actions")]
    kept.append({"type": "context", "elements": [{"type": "mrkdwn", "text": line}]})
    return {"text": f"{text}: {line}", "blocks": kept}
