"""``GET /workers``: every worker that sent a heartbeat, live or not, and the versions served."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from contracts import Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer
from shim.api.openapi import OBJECT, Op, documented
from shim.api.services import health
from shim.tokens import Identity

router = APIRouter()


@router.get("/workers", openapi_extra=documented(Op(answer=OBJECT)))
def get_workers(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))], service: ServiceDep
) -> Answer:
    s = service.settings
    return Answer(health.workers(service.db, s.app_version, s.dead_after_s))
