"""``GET /runs/{run_id}/events``: a run's event stream over server-sent events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from sse_starlette import EventSourceResponse

from contracts import Role
from shim.api.deps import ServiceDep, require
from shim.api.openapi import Op, documented
from shim.api.params import RunId
from shim.api.services import events
from shim.tokens import Identity

router = APIRouter()


@router.get(
    "/runs/{run_id}/events",
    openapi_extra=documented(Op(answer="text/event-stream", errors=(404, 400, 422))),
)
async def run_events(
    request: Request,
    caller: Annotated[Identity, Depends(require(Role.SUBMITTER, Role.APPROVER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
    after: Annotated[int | None, Query(ge=0, le=10**12)] = None,
) -> EventSourceResponse:
    """Server-sent events of one run: phase changes, step starts and finishes,
    ledger writes, episodes, decisions and messages; resumable with Last-Event-ID."""
    last_event_id = request.headers.get("last-event-id")
    stream = await events.open_stream(service, run_id, caller, last_event_id, after)
    return EventSourceResponse(stream, ping=events.PING_S)
