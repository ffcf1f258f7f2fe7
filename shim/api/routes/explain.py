"""``GET /runs/{run_id}/explain``: a worker's report on a finished run, from its evidence."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from contracts import ExplainView, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response
from shim.api.openapi import Op, documented
from shim.api.params import RunId
from shim.api.services.explain import explain
from shim.tokens import Identity

router = APIRouter()


@router.get(
    "/runs/{run_id}/explain",
    openapi_extra=documented(Op(answer=ExplainView, errors=(404, 409, 422, 502, 504))),
)
def get_explain(
    caller: Annotated[Identity, Depends(require(Role.SUBMITTER, Role.APPROVER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    # Sync: FastAPI runs it in a worker thread while a worker asks the model.
    return model_response(explain(service, run_id, caller))
