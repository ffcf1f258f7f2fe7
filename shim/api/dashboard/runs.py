"""``/dashboard``: the runs, newest first, by status and recipe (a submitter sees its own)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError, RunStatus
from shim.api.dashboard._pages import ANY_ROLE, PageRoute, common, page, viewer
from shim.api.deps import ServiceDep
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)


@router.get("/dashboard")
async def runs_page(
    request: Request,
    me: Annotated[Identity, Depends(viewer(*ANY_ROLE))],
    service: ServiceDep,
    *,
    status: Annotated[str, Query(max_length=40)] = "",
    recipe: Annotated[str, Query(max_length=64)] = "",
    cursor: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
) -> Response:
    try:
        wanted = RunStatus(status) if status else None
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"no status {status!r}") from exc
    listed = await run_in_threadpool(
        lambda: reads.run_list(service, wanted, 50, cursor, me, recipe=recipe.strip() or None)
    )
    nxt = {"status": status, "recipe": recipe, "cursor": listed.next_cursor or ""}
    return page("runs.html", runs=listed.runs, statuses=[s.value for s in RunStatus],
                status=status, recipe=recipe, next_cursor=listed.next_cursor,
                next_query=urlencode(nxt), **common(request, me))  # fmt: skip
