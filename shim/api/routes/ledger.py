"""``GET /runs/{run_id}/ledger`` and ``/ledger/verify``: a run's calls, its hash chain checked."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from contracts import CallView, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer
from shim.api.openapi import Listing, Op, Schema, documented
from shim.api.params import RunId
from shim.api.services import reads
from shim.tokens import Identity

# What the check of a run's chain answers, at the least (``ledger.chain_verify``).
_VERIFIED: Schema = {
    "type": "object",
    "required": ["run_id", "entries", "ok"],
    "properties": {"run_id": {"type": "string"}, "entries": {"type": "integer"},
                   "ok": {"type": "boolean"}},
}  # fmt: skip

router = APIRouter()

Operator = Annotated[Identity, Depends(require(Role.OPERATOR))]


@router.get(
    "/runs/{run_id}/ledger",
    openapi_extra=documented(Op(answer=Listing("calls", CallView), errors=(404, 422))),
)
def get_ledger(caller: Operator, service: ServiceDep, run_id: RunId) -> Answer:
    calls = reads.ledger(service, run_id)
    return Answer({"calls": [c.model_dump(mode="json") for c in calls]})


@router.get(
    "/runs/{run_id}/ledger/verify",
    openapi_extra=documented(Op(answer=_VERIFIED, errors=(404, 422))),
)
def verify_ledger(caller: Operator, service: ServiceDep, run_id: RunId) -> Answer:
    return Answer(reads.verify_ledger(service, run_id))
