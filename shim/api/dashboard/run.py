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

from contracts import GatehouseError, Role, RunStatus, RunView, shown_input
from policies import catalog
from policies.summary import summarize
from policies.taint import tainted
from shim.api.dashboard._pages import ANY_ROLE, PageRoute, common, page, pretty, viewer
from shim.api.deps import ServiceDep
from shim.api.params import RunId
from shim.api.services import events, reads
from shim.api.services.core import Service
from shim.api.services.decide import why_not
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)

Viewer = Annotated[Identity, Depends(viewer(*ANY_ROLE))]


# A plan card's state in words, as its run stands (a card still "waiting" on a run that
# has ended was never decided: the run's status says why).
_CARD_WORDS = {
    "waiting_input": "waiting for a decision",
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired undecided: denied",
}


def _card_state(view: RunView) -> str:
    card = view.plan_card
    if card is None:
        return ""
    if card.status == "waiting_input" and view.status is not RunStatus.WAITING_APPROVAL:
        return "not decided: the run is " + view.status.value.replace("_", " ")
    return _CARD_WORDS.get(card.status, card.status)


def _changes(view: RunView) -> list[dict[str, str]]:
    """A later revision's changes from the one before, each as words and JSON text."""
    card = view.plan_card
    out: list[dict[str, str]] = []
    for change in (card.changes or []) if card is not None else []:
        if not isinstance(change, dict):
            continue
        kind = str(change.get("change", ""))
        before = change.get("before", change.get("step") if kind == "removed" else None)
        after = change.get("after", change.get("step") if kind == "added" else None)
        out.append({
            "what": kind, "step_id": str(change.get("step_id") or ""),
            "before": "" if before is None else pretty(before),
            "after": "" if after is None else pretty(after),
        })  # fmt: skip
    return out


def _reviews_outside_data(profile_id: str) -> bool:
    """The run's profile has a person decide on outside data once its value exists."""
    try:
        return catalog.profile(profile_id).model.approval.reapprove_outside_data
    except GatehouseError:  # a profile since removed
        return False


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
    waiting = view.status is RunStatus.WAITING_APPROVAL and card is not None
    refused = why_not(service, view, me) if waiting else None
    return {
        "view": view,
        "plan_inputs": inputs,
        "summary": summarize(
            card.plan, catalog.tool_pool_if_here(view.tool_pool, view.tool_pool_digest)
        )
        if card is not None
        else None,
        "reviews_outside_data": _reviews_outside_data(view.policy_profile),
        "card_state": _card_state(view),
        "changes": _changes(view),
        "plan_json": pretty(card.plan.model_dump(mode="json")) if card is not None else "",
        "operator": operator,
        "can_decide": waiting and refused is None,
        "not_deciding": refused.message if refused is not None else None,
        "can_replay": operator and view.status.terminal,
        "outputs": {s.step_id: pretty(s.output) for s in view.steps if s.output is not None},
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
