"""Decisions from Slack, ``POST /slack/interactions``: a front door for approvers.

A Slack sink with ``buttons: true`` (the notifications file) posts a waiting
plan's message with Approve and Reject; Slack sends each click here. The shim
honours a click only when Slack signed it with the app's signing secret and its
timestamp is within five minutes (``slack_signature_invalid``,
``slack_request_stale``), and only once (``slack_request_replayed``). The Slack
user decides as the Gatehouse identity the Slack file maps it to, with that
identity's roles (``slack_user_unknown``); the decision is the API's
(``shim.api.services.decide``): digest-bound to the plan the message showed,
four-eyes, refused when the plan expired. The message is then replaced with
who decided, or the clicker is told privately why not.

    _config.py  the Slack file (GATEHOUSE_SLACK) and the signing secret: SlackDoor
    _verify.py  a request's signature, timestamp and first sight
    _reply.py   what the message becomes, and sending it to Slack's response_url
    _route.py   the route: verify, decide, reply
"""

from __future__ import annotations

from fastapi import APIRouter

from shim.api.slack._config import SlackDoor, open_slack
from shim.api.slack._reply import (
    closed_message,
    decided_message,
    refusal_message,
    short_of_quorum,
)
from shim.api.slack._route import router
from shim.api.slack._verify import MAX_SKEW_S, verify

__all__ = [
    "MAX_SKEW_S",
    "ROUTERS",
    "SlackDoor",
    "closed_message",
    "decided_message",
    "open_slack",
    "refusal_message",
    "short_of_quorum",
    "verify",
]

ROUTERS: tuple[APIRouter, ...] = (router,)
