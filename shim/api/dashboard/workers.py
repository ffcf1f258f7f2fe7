"""``/dashboard/workers``: the workers' heartbeats, and which are live (operators)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import Role
from shim.api.dashboard._pages import PageRoute, common, page, viewer
from shim.api.deps import ServiceDep
from shim.api.services import health
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)

_COLUMNS = ["executor_id", "app_version", "hostname", "pid", "heartbeat_at",
            "heartbeat_age_s", "live", "serves_queue"]  # fmt: skip


@router.get("/dashboard/workers")
async def workers_page(
    request: Request,
    me: Annotated[Identity, Depends(viewer(Role.OPERATOR))],
    service: ServiceDep,
) -> Response:
    s = service.settings
    report = await run_in_threadpool(health.workers, service.db, s.app_version, s.dead_after_s)
    rows = report.get("workers")
    listed = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    return page("workers.html", workers=listed, columns=_COLUMNS, **common(request, me))
