"""``POST /runs/{run_id}/replay``: a worker replays a finished run from its ledger (operators)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from contracts import ReplayReport, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response
from shim.api.openapi import Op, documented
from shim.api.params import RunId
from shim.api.services import operators
from shim.tokens import Identity

router = APIRouter()


@router.post(
    "/runs/{run_id}/replay",
    openapi_extra=documented(Op(answer=ReplayReport, errors=(404, 409, 422))),
)
def replay(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
    rules: Annotated[Literal["recorded", "current"], Query()] = "recorded",
) -> Answer:
    """Replay under the profile and tool pool versions the run ran under, or under
    today's files (``rules=current``: would it still pass?)."""
    # Sync: FastAPI runs it in a worker thread while a worker replays the run.
    return model_response(operators.replay(service, run_id, caller, rules))
