"""``GET /runs/{run_id}/artifacts`` and ``/artifacts/{sha256}``: a run's artifacts, one's bytes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from contracts import Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer
from shim.api.openapi import Listing, Op, documented
from shim.api.params import RunId, Sha256
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter()

Operator = Annotated[Identity, Depends(require(Role.OPERATOR))]


@router.get(
    "/runs/{run_id}/artifacts",
    openapi_extra=documented(Op(answer=Listing("artifacts"), errors=(404, 422))),
)
def get_artifacts(caller: Operator, service: ServiceDep, run_id: RunId) -> Answer:
    return Answer({"artifacts": reads.artifacts(service, run_id)})


@router.get(
    "/artifacts/{sha256}",
    openapi_extra=documented(Op(answer="application/octet-stream", errors=(404, 422))),
)
def get_artifact(caller: Operator, service: ServiceDep, sha256: Sha256) -> Response:
    media_type, content = reads.artifact(service, sha256)
    # Artifacts are tool output (channel system_log): served as inert bytes.
    return Response(
        content,
        media_type="application/octet-stream",
        headers={
            "X-Content-Type-Options": "nosniff",
            "X-Gatehouse-Media-Type": media_type,
            "X-Text-Channel": "system_log",
        },
    )
