"""``/healthz`` (liveness) and ``/readyz`` (readiness): open, for probes, naming no secret.

Each answers ``HEAD`` as it answers ``GET`` (uptime probes ask with ``HEAD``): the
same status and headers, and the server sends no body (RFC 9110 §9.3.2). ``HEAD``
is a route of its own, left out of the OpenAPI document: one route taking both
would be two operations there, with one operation id.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from shim.api.deps import ServiceDep
from shim.api.http import Answer
from shim.api.openapi import OBJECT, Op, Schema, documented
from shim.api.services import health

_STATUS: Schema = {"type": "object", "required": ["status"],
                   "properties": {"status": {"type": "string"}}}  # fmt: skip

router = APIRouter()


@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", openapi_extra=documented(Op(answer=_STATUS, public=True)))
def healthz(service: ServiceDep) -> Answer:
    health.ping(service.db)
    return Answer({"status": "ok", "database": "ok"})


@router.head("/readyz", include_in_schema=False)
@router.get("/readyz", openapi_extra=documented(Op(answer=OBJECT, public=True, errors=(503,))))
async def readyz(service: ServiceDep) -> Answer:
    # Open like /healthz, for probes: it names what is missing, never a secret.
    s = service.settings
    ready, report = await run_in_threadpool(
        health.readiness, service.db, s.app_version, s.dead_after_s
    )
    return Answer(report, status_code=200 if ready else 503)
