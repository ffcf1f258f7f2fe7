"""``POST /runs/{run_id}/cancel``: cancel a run (its submitter, or an operator)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import CancelAccepted, CancelRequest, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import RunId
from shim.api.services.cancel import cancel_run
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/runs/{run_id}/cancel",
    openapi_extra=documented(
        Op(answer=CancelAccepted, body=CancelRequest, errors=(404, 409, *BODY))
    ),
)
async def cancel(
    request: Request,
    # Its submitter or an operator; the service checks which runs a submitter owns.
    caller: Annotated[Identity, Depends(require(Role.SUBMITTER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.cancel_request_v1", CancelRequest
    )
    return model_response(await run_in_threadpool(cancel_run, service, run_id, body, caller))
