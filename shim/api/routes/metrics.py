"""``GET /metrics``: Prometheus text, read from the database at each scrape (operators).

Prometheus sends the operator's token: ``authorization: {credentials: TOKEN}``
in the scrape config. Nothing is counted in the shim's memory, so every shim
answers the same numbers, and a restart loses none.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from contracts import Role
from shim.api.deps import ServiceDep, require
from shim.api.openapi import Op, documented
from shim.api.services import metrics
from shim.tokens import Identity

router = APIRouter()


@router.get("/metrics", openapi_extra=documented(Op(answer="text/plain")))
def get_metrics(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))], service: ServiceDep
) -> Response:
    return Response(metrics.scrape(service.db), media_type=metrics.MEDIA_TYPE)
