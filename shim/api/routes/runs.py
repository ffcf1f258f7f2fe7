"""``GET /runs``, ``/runs/{run_id}`` and ``/runs/{run_id}/wait``: runs, one run, a long poll.

Submitters read their own runs; approvers and operators read all (the service filters).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from contracts import Role, RunList, RunStatus, RunView
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer, model_response
from shim.api.openapi import Op, documented
from shim.api.params import RunId
from shim.api.services import reads
from shim.api.services.wait import UNTIL_PATTERN, wait_for_run
from shim.tokens import Identity

router = APIRouter()

Reader = Annotated[Identity, Depends(require(Role.SUBMITTER, Role.APPROVER, Role.OPERATOR))]


@router.get("/runs", openapi_extra=documented(Op(answer=RunList, errors=(400, 422))))
def list_runs(
    caller: Reader,
    service: ServiceDep,
    status: RunStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
) -> Answer:
    return model_response(reads.run_list(service, status, limit, cursor, caller))


@router.get("/runs/{run_id}", openapi_extra=documented(Op(answer=RunView, errors=(404, 422))))
def get_run(caller: Reader, service: ServiceDep, run_id: RunId) -> Answer:
    return model_response(reads.run(service, run_id, caller))


@router.get(
    "/runs/{run_id}/wait",
    openapi_extra=documented(
        Op(answer=RunView, errors=(404, 422), headers={"Gatehouse-Wait": "reached or timeout"})
    ),
)
async def wait_run(
    caller: Reader,
    service: ServiceDep,
    run_id: RunId,
    # The contract states the pattern; parse_until enforces it and names a bad status.
    until: Annotated[
        str | None, Query(max_length=400, json_schema_extra={"pattern": UNTIL_PATTERN})
    ] = None,
    timeout_s: Annotated[float, Query(gt=0, le=60)] = 25.0,
) -> Answer:
    """The run once its status is one of ``until`` (default: a person must act, or
    it is over) or ``timeout_s`` passed; header ``Gatehouse-Wait: reached|timeout``."""
    view, reached = await wait_for_run(service, run_id, caller, until, timeout_s)
    answer = model_response(view)
    answer.headers["Gatehouse-Wait"] = "reached" if reached else "timeout"
    return answer
