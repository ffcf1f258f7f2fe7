"""``GET /runs/{run_id}/output.opa``: the output archive of a run submitted as an OPA archive.

(An archive is submitted through ``POST /intent``: ``shim.api.routes.intents``.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from contracts import Role
from shim.api.deps import ServiceDep, require
from shim.api.openapi import Op, documented
from shim.api.params import RunId
from shim.api.services.opa_runs import MEDIA_TYPE, output_archive
from shim.tokens import Identity

router = APIRouter()


@router.get(
    "/runs/{run_id}/output.opa",
    openapi_extra=documented(Op(answer="application/vnd.opa+zip", errors=(404, 409, 422))),
)
def get_output_archive(
    caller: Annotated[Identity, Depends(require(Role.SUBMITTER, Role.APPROVER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Response:
    content = output_archive(service, run_id, caller)
    return Response(
        content,
        media_type=MEDIA_TYPE,
        headers={
            "Content-Disposition": f'attachment; filename="{run_id}.output.opa"',
            "X-Content-Type-Options": "nosniff",
        },
    )
