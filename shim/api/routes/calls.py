"""``POST /calls/{op_key}/resolve``: an operator's word on an in-doubt call."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import CallResolution, CallResolved, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import OpKey
from shim.api.services import operators
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/calls/{op_key}/resolve",
    openapi_extra=documented(
        Op(answer=CallResolved, body=CallResolution, errors=(404, 409, *BODY))
    ),
)
async def resolve(
    request: Request,
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))],
    service: ServiceDep,
    op_key: OpKey,
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.call_resolution_v1", CallResolution
    )
    return model_response(await run_in_threadpool(operators.resolve, service, op_key, body, caller))
