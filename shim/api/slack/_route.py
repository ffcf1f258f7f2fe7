"""``POST /slack/interactions``: a click on a decision button, verified, decided, answered.

Slack wants an answer within three seconds and shows its own error for anything
but a 2xx, so once a request is verified as Slack's every outcome is a 200 that
says what happened (``outcome``); the person learns it from the message. A
request that is not Slack's, or not new, is refused with its code.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from contracts import (
    APPROVE_ACTION,
    DECISION_ACTIONS,
    ApprovalRequest,
    Decision,
    DecisionButton,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Role,
)
from shim.api.deps import ServiceDep, TokensDep
from shim.api.errors import record_refused
from shim.api.http import Answer, media_type, problems, read_capped
from shim.api.openapi import BODY, Op, Schema, documented
from shim.api.services.decide import decide
from shim.api.slack._config import SlackDoor
from shim.api.slack._reply import (
    closed_message,
    decided_message,
    for_everyone,
    refusal_message,
    send_reply,
    short_of_quorum,
)
from shim.api.slack._verify import verify
from shim.tokens import Identity, TokenStore

__all__ = ["router"]

# What Slack posts (a form), and what the click came to.
_FORM: Schema = {
    "type": "object",
    "required": ["payload"],
    "properties": {
        "payload": {"type": "string", "description": "the interaction, as Slack sends it"}
    },
}
_OUTCOME: Schema = {
    "type": "object",
    "required": ["outcome"],
    "properties": {
        "outcome": {"type": "string", "enum": ["approved", "rejected", "refused", "ignored"]}
    },
}

router = APIRouter()


class _Open(BaseModel):
    """Slack's payloads carry many more fields than Gatehouse reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class _Who(_Open):
    id: str


class _Action(_Open):
    action_id: str
    value: str = ""


class _Interaction(_Open):
    type: str
    user: _Who
    team: _Who | None = None
    actions: list[_Action] = []
    response_url: str = ""
    message: dict[str, Any] | None = None


async def _door(request: Request) -> SlackDoor:
    door = getattr(request.app.state, "slack", None)
    if not isinstance(door, SlackDoor):
        raise GatehouseError(
            ErrorCode.NOT_FOUND, "Slack decisions are not set up on this shim (GATEHOUSE_SLACK)"
        )
    return door


SlackDep = Annotated[SlackDoor, Depends(_door)]


def _interaction(body: bytes) -> _Interaction:
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=20)
    except ValueError as exc:  # more fields than any interaction has
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, "the form is not a Slack interaction"
        ) from exc
    raw = fields.get("payload", [""])[0]
    try:
        return _Interaction.model_validate_json(raw)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, "the payload is not a Slack interaction", problems(exc)
        ) from exc


def _decider(door: SlackDoor, tokens: TokenStore, click: _Interaction) -> Identity:
    """The Gatehouse identity the clicking Slack user decides as, with its roles now."""
    team = click.team.id if click.team is not None else None
    if door.config.team_id is not None and team != door.config.team_id:
        raise GatehouseError(
            ErrorCode.SLACK_USER_UNKNOWN, f"the click came from another Slack workspace ({team})"
        )
    name = door.identity_of(click.user.id)
    if name is None:
        raise GatehouseError(
            ErrorCode.SLACK_USER_UNKNOWN,
            f"Slack user {click.user.id} is not mapped to a Gatehouse identity (the Slack file)",
        )
    who = tokens.named(name)
    if who is None or not who.has(Role.APPROVER):
        raise GatehouseError(
            ErrorCode.SLACK_USER_UNKNOWN,
            f"Slack user {click.user.id} is {name}, who holds no approver token",
            {"identity": name},
        )
    return who


def _button(action: _Action) -> DecisionButton:
    try:
        return DecisionButton.model_validate_json(action.value)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, "the button carries no run and plan digest", problems(exc)
        ) from exc


@router.post(
    "/slack/interactions",
    openapi_extra=documented(
        Op(answer=_OUTCOME, form=_FORM, public=True, errors=(401, 404, 409, *BODY))
    ),
)
async def interactions(
    request: Request, service: ServiceDep, tokens: TokensDep, door: SlackDep
) -> Answer:
    body = await read_capped(request, service.settings.max_body_bytes)
    await run_in_threadpool(verify, door, service.db, body, request.headers)
    if media_type(request) != "application/x-www-form-urlencoded":
        raise GatehouseError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, "Slack sends interactions as a form")
    click = _interaction(body)
    action = next((a for a in click.actions if a.action_id in DECISION_ACTIONS), None)
    if click.type != "block_actions" or action is None:
        return Answer({"outcome": "ignored", "type": click.type})
    button = _button(action)
    decision = Decision.APPROVED if action.action_id == APPROVE_ACTION else Decision.REJECTED
    try:
        who = _decider(door, tokens, click)
        request.state.identity = who.name
        asked = ApprovalRequest(
            plan_digest=button.plan_digest, comment=f"decided in Slack by {click.user.id}"
        )
        done = await run_in_threadpool(
            decide, service, button.run_id, body=asked, decision=decision, who=who
        )
    except GatehouseError as exc:
        if exc.code in (ErrorCode.DATABASE_UNAVAILABLE, ErrorCode.STORAGE_FULL):
            raise  # Slack shows its own error; the click can be made again
        await record_refused(request, exc)
        answer: JsonObject = {"outcome": "refused", "error": exc.to_json()}
        told = (
            closed_message(click.message, button.run_id, exc)
            if for_everyone(exc)
            else refusal_message(exc)
        )
        return Answer(answer, background=_reply(door, click, told))
    answer = {"outcome": decision.value, "run_id": button.run_id, "decided_by": done.decided_by,
              "recorded": done.recorded}  # fmt: skip
    if done.quorum is not None and done.quorum.missing:  # counted: the plan waits for more
        answer["quorum"] = done.quorum.model_dump(mode="json")
        message = short_of_quorum(done.quorum)
    else:
        message = decided_message(
            click.message, button.run_id, decision.value, done.decided_by, click.user.id
        )
    return Answer(answer, background=_reply(door, click, message))


def _reply(door: SlackDoor, click: _Interaction, message: JsonObject) -> BackgroundTask | None:
    if not click.response_url:
        return None
    return BackgroundTask(send_reply, door, click.response_url, message)
