"""A run page's forms and checks: approve, reject, edit, cancel, replay, verify the ledger.

Each form carries the session's form token and is checked with its Origin
(``checked_form``) before the service is asked; the answer is the run page
again with a notice, or a page with the result.
"""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from contracts import (
    ApprovalRequest,
    CancelRequest,
    Decision,
    ErrorCode,
    GatehouseError,
    PlanEditRequest,
    Role,
)
from shim.api.dashboard._pages import PageRoute, checked_form, common, page, pretty, viewer
from shim.api.deps import ServiceDep
from shim.api.params import RunId
from shim.api.services import edits, operators, reads
from shim.api.services.cancel import cancel_run
from shim.api.services.core import Service
from shim.api.services.decide import decide
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)

Approver = Annotated[Identity, Depends(viewer(Role.APPROVER))]
Operator = Annotated[Identity, Depends(viewer(Role.OPERATOR))]


async def _decide(
    request: Request, service: Service, me: Identity, run_id: str, decision: Decision
) -> Response:
    form = await checked_form(request)
    try:
        body = ApprovalRequest(
            plan_digest=form.get("plan_digest", ""), comment=form.get("comment") or None
        )
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, "the form is not valid") from exc
    await run_in_threadpool(decide, service, run_id, body=body, decision=decision, who=me)
    done = quote(f"{decision.value} by {me.name}")
    return RedirectResponse(f"/dashboard/runs/{run_id}?done={done}", status_code=303)


@router.post("/dashboard/runs/{run_id}/approve")
async def approve_form(
    request: Request, me: Approver, service: ServiceDep, run_id: RunId
) -> Response:
    return await _decide(request, service, me, run_id, Decision.APPROVED)


@router.post("/dashboard/runs/{run_id}/reject")
async def reject_form(
    request: Request, me: Approver, service: ServiceDep, run_id: RunId
) -> Response:
    return await _decide(request, service, me, run_id, Decision.REJECTED)


@router.post("/dashboard/runs/{run_id}/edit")
async def edit_form(request: Request, me: Approver, service: ServiceDep, run_id: RunId) -> Response:
    """The plan as the approver edited it (JSON): a new run waits on the edit."""
    form = await checked_form(request)
    try:
        body = PlanEditRequest.model_validate({
            "plan": json.loads(form.get("plan", "")),
            "previous_digest": form.get("previous_digest", ""),
            "comment": form.get("comment") or None,
        })  # fmt: skip
    except ValueError as exc:  # not JSON, or not a plan: said on the error page
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, f"the edited plan is not a valid plan: {exc}"[:2000]
        ) from exc
    edited = await run_in_threadpool(edits.edit_plan, service, run_id, body=body, who=me)
    done = quote(f"edited by {me.name}: this run waits for someone else's decision")
    return RedirectResponse(f"/dashboard/runs/{edited.run_id}?done={done}", status_code=303)


@router.post("/dashboard/runs/{run_id}/cancel")
async def cancel_form(
    request: Request,
    me: Annotated[Identity, Depends(viewer(Role.SUBMITTER, Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Response:
    form = await checked_form(request)
    try:
        body = CancelRequest(reason=form.get("reason") or None)
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, "the form is not valid") from exc
    await run_in_threadpool(cancel_run, service, run_id, body, me)
    done = quote(f"cancel requested by {me.name}")
    return RedirectResponse(f"/dashboard/runs/{run_id}?done={done}", status_code=303)


@router.post("/dashboard/runs/{run_id}/replay")
async def replay_form(
    request: Request, me: Operator, service: ServiceDep, run_id: RunId
) -> Response:
    await checked_form(request)
    report = await run_in_threadpool(operators.replay, service, run_id, me)
    verdict = (f"replayed {report.calls} calls from the ledger, "
               f"{report.outbound_calls} outbound: "
               + ("the trace matches" if report.match else "it DIVERGED"))  # fmt: skip
    return page("result.html", heading=f"Replay of {run_id}", ok=report.match,
                verdict=verdict, report=pretty(report.model_dump(mode="json")),
                run_id=run_id, **common(request, me))  # fmt: skip


@router.get("/dashboard/runs/{run_id}/verify")
async def verify_page(
    request: Request, me: Operator, service: ServiceDep, run_id: RunId
) -> Response:
    report = await run_in_threadpool(reads.verify_ledger, service, run_id)
    ok = report.get("ok") is True
    verdict = "the hash chain verifies" if ok else "the hash chain does NOT verify"
    return page("result.html", heading=f"Ledger of {run_id}", ok=ok, verdict=verdict,
                report=pretty(report), run_id=run_id, **common(request, me))  # fmt: skip
