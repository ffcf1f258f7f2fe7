"""``/dashboard/runs/{run_id}``: one run, live: its plan, steps, calls, evidence and actions.

The page listens to the run's event stream (``…/events``) and re-renders its
body (``…/body``) as events arrive. Operators see the ledger, the episodes and
the artifacts too.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from contracts import Role, RunStatus, shown_input
from policies.taint import tainted
from shim.api.dashboard._pages import ANY_ROLE, PageRoute, common, page, pretty, viewer
from shim.api.deps import ServiceDep
from shim.api.params import RunId
from shim.api.services import events, reads
from shim.api.services.core import Service
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)

Viewer = Annotated[Identity, Depends(viewer(*ANY_ROLE))]


def _run_context(
    request: Request, service: Service, me: Identity, run_id: str
) -> dict[str, object]:
    view = reads.run(service, run_id, me)
    operator = me.has(Role.OPERATOR)
    calls = reads.ledger(service, view.run_id) if operator else []
    durations = {c.step_id: f"{c.duration_ms} ms" for c in calls if c.duration_ms is not None}
    episodes = reads.episodes(service, view.run_id) if operator else []
    card = view.plan_card
    inputs: list[str] = []
    if card is not None:
        outside = tainted(card.plan)
        inputs = [shown_input(st, st.step_id in outside) for st in card.plan.steps]
    own = view.submitted_by == me.name
    return {
        "view": view,
        "plan_inputs": inputs,
        "operator": operator,
        "can_decide": me.has(Role.APPROVER) and view.status is RunStatus.WAITING_APPROVAL,
        "can_cancel": (operator or (own and me.has(Role.SUBMITTER))) and not view.status.terminal,
        "calls": calls,
        "durations": durations,
        "episodes": [
            {**e.model_dump(mode="json"), "body_text": pretty(e.model_dump(mode="json"))}
            for e in episodes
        ],
        "artifacts": reads.artifacts(service, view.run_id) if operator else [],
        **common(request, me),
    }


@router.get("/dashboard/runs/{run_id}")
async def run_page(request: Request, me: Viewer, service: ServiceDep, run_id: RunId) -> Response:
    context = await run_in_threadpool(_run_context, request, service, me, run_id)
    return page("run.html", **context)


@router.get("/dashboard/runs/{run_id}/body")
async def run_body(request: Request, me: Viewer, service: ServiceDep, run_id: RunId) -> Response:
    context = await run_in_threadpool(_run_context, request, service, me, run_id)
    return page("_run_body.html", **context)


@router.get("/dashboard/runs/{run_id}/events")
async def run_events_for_dashboard(
    request: Request, me: Viewer, service: ServiceDep, run_id: RunId
) -> Response:
    last_event_id = request.headers.get("last-event-id")
    stream = await events.open_stream(service, run_id, me, last_event_id, None)
    return EventSourceResponse(stream, ping=events.PING_S)
