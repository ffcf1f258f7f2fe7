"""``POST /runs/{run_id}/fork``: a new run from a finished one's plan step (approvers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import ForkAccepted, ForkRequest, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import RunId
from shim.api.services import operators
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/runs/{run_id}/fork",
    openapi_extra=documented(
        Op(ok=202, answer=ForkAccepted, body=ForkRequest, errors=(404, 409, *BODY))
    ),
)
async def fork(
    request: Request,
    caller: Annotated[Identity, Depends(require(Role.APPROVER))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.fork_request_v1", ForkRequest
    )
    forked = await run_in_threadpool(operators.fork, service, run_id, body=body, who=caller)
    return model_response(forked, 202)
