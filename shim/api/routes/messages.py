"""``POST /runs/{run_id}/messages``: the next turn of an interactive OPA run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import MessageAccepted, MessageRequest, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import RunId
from shim.api.services.messages import send_message
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/runs/{run_id}/messages",
    openapi_extra=documented(
        Op(ok=202, answer=MessageAccepted, body=MessageRequest, errors=(404, 409, *BODY))
    ),
)
async def post_message(
    request: Request,
    # Its submitter or an operator: the next turn of an interactive OPA run.
    caller: Annotated[Identity, Depends(require(Role.SUBMITTER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.run_message_v1", MessageRequest
    )
    accepted = await run_in_threadpool(send_message, service, run_id, body, caller)
    return model_response(accepted, status=202)
