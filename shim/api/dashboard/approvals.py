"""``/dashboard/approvals``: the runs waiting for a decision, oldest first (approvers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import Role, RunStatus
from shim.api.dashboard._pages import PageRoute, common, page, viewer
from shim.api.deps import ServiceDep
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)


@router.get("/dashboard/approvals")
async def approvals_page(
    request: Request,
    me: Annotated[Identity, Depends(viewer(Role.APPROVER, Role.OPERATOR))],
    service: ServiceDep,
) -> Response:
    waiting = await run_in_threadpool(
        reads.run_list, service, RunStatus.WAITING_APPROVAL, 200, None, me
    )
    oldest = sorted(waiting.runs, key=lambda r: (r.updated_at, r.run_id))
    return page("approvals.html", runs=oldest, **common(request, me))
