"""``/dashboard/security``: refused requests and refusals inside runs (operators)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import Role
from shim.api.dashboard._pages import PageRoute, common, page, pretty, viewer
from shim.api.deps import ServiceDep
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)


@router.get("/dashboard/security")
async def security_page(
    request: Request,
    me: Annotated[Identity, Depends(viewer(Role.OPERATOR))],
    service: ServiceDep,
) -> Response:
    found = await run_in_threadpool(reads.security_events, service, 200)
    rows = [{**e, "text": pretty(e)} for e in found]
    return page("security.html", events=rows, **common(request, me))
