"""``POST /approve/{run_id}`` and ``/reject/{run_id}``: a decision on a run's plan (approvers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from contracts import ApprovalRequest, Decision, DecisionAccepted, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.openapi import BODY, Op, documented
from shim.api.params import RunId
from shim.api.services.decide import decide
from shim.tokens import Identity

router = APIRouter()

Approver = Annotated[Identity, Depends(require(Role.APPROVER))]


async def _decide(
    request: Request, service: ServiceDep, run_id: str, decision: Decision, caller: Identity
) -> Answer:
    body = await read_body(
        request, service.settings.max_body_bytes, "env.approval_request_v1", ApprovalRequest
    )
    return model_response(decide(service, run_id, body=body, decision=decision, who=caller))


@router.post(
    "/approve/{run_id}",
    openapi_extra=documented(
        Op(answer=DecisionAccepted, body=ApprovalRequest, errors=(404, 409, *BODY))
    ),
)
async def approve(request: Request, caller: Approver, service: ServiceDep, run_id: RunId) -> Answer:
    return await _decide(request, service, run_id, Decision.APPROVED, caller)


@router.post(
    "/reject/{run_id}",
    openapi_extra=documented(
        Op(answer=DecisionAccepted, body=ApprovalRequest, errors=(404, 409, *BODY))
    ),
)
async def reject(request: Request, caller: Approver, service: ServiceDep, run_id: RunId) -> Answer:
    return await _decide(request, service, run_id, Decision.REJECTED, caller)
