"""GET /runs/{id}/explain: ask a worker for the run's explain report and wait for it.

The shim never calls a model. Like a replay, it enqueues the
``gatehouse.explain`` workflow by name (DBOSClient) and waits for the worker's
answer: the report recorded in the ledger for this evidence, or a new one the
worker asked the model for through the ledger.
"""

from __future__ import annotations

import time
import uuid

from dbos import WorkflowHandle

from contracts import (
    EXPLAIN_WORKFLOW,
    ErrorCode,
    ExplainView,
    GatehouseError,
    JsonValue,
    queue_partition,
)
from ledger import work_queue
from shim.api.services import reads
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["EXPLAIN_WAIT_S", "explain"]

# How long GET /runs/{id}/explain waits for a worker (a model turn included).
EXPLAIN_WAIT_S = 90.0


def explain(service: Service, run_id: str, who: Identity) -> ExplainView:
    """The run's explain report. Whoever may read the run may ask for it."""
    view = reads.run(service, run_id, who)  # run_not_found, or forbidden for another's run
    if not view.status.terminal:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FINISHED,
            f"run {run_id!r} is {view.status.value}; only a finished run can be explained",
            {"status": view.status.value},
        )
    partition = queue_partition(who.name)
    handle: WorkflowHandle[JsonValue] = service.client.enqueue(
        work_queue.enqueue_options(
            EXPLAIN_WORKFLOW,
            f"explain_{run_id}_{uuid.uuid4().hex[:12]}",
            service.settings.app_version,
            partition,
        ),
        run_id,
    )
    service.work_queued(partition)
    deadline = time.monotonic() + EXPLAIN_WAIT_S
    while handle.get_status().status not in ("SUCCESS", "ERROR"):
        if time.monotonic() >= deadline:
            service.client.cancel_workflow(handle.get_workflow_id())
            raise GatehouseError(
                ErrorCode.NO_WORKER,
                f"no worker explained run {run_id!r} in {EXPLAIN_WAIT_S:.0f} s",
            )
        time.sleep(0.1)
    answer = handle.get_result()
    if not isinstance(answer, dict):
        raise GatehouseError(ErrorCode.INTERNAL_ERROR, "the explain answered nothing")
    err = answer.get("error")
    if isinstance(err, dict):
        details = err.get("details")
        raise GatehouseError(
            _code(err.get("code")),
            str(err.get("message")),
            details if isinstance(details, dict) else {},
        )
    return ExplainView.model_validate(answer.get("explain"))


def _code(value: JsonValue) -> ErrorCode:
    """The worker's error code; one this shim does not know is an internal error."""
    try:
        return ErrorCode(str(value))
    except ValueError:
        return ErrorCode.INTERNAL_ERROR
