"""``POST /runs/{run_id}/plan``: an approver's edit of a plan waiting for a decision;
the edited plan runs as a new run once someone else approves it (approvers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import PlanEditAccepted, PlanEditRequest, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import RunId
from shim.api.services import edits
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/runs/{run_id}/plan",
    openapi_extra=documented(
        Op(ok=202, answer=PlanEditAccepted, body=PlanEditRequest, errors=(404, 409, *BODY))
    ),
)
async def edit_plan(
    request: Request,
    caller: Annotated[Identity, Depends(require(Role.APPROVER))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.plan_edit_v1", PlanEditRequest
    )
    edited = await run_in_threadpool(edits.edit_plan, service, run_id, body=body, who=caller)
    return model_response(edited, 202)
