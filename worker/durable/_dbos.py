"""The one module that reaches into DBOS Transact's private API (pinned: dbos 3.4.0).

Everything else in Gatehouse uses ``dbos``'s public names. Each use here says
why no public name does the job; a DBOS upgrade checks these first.
"""

from __future__ import annotations

from dbos import DBOS, SQLAlchemyDatasource

# A datasource transaction's options (name, isolation level): a TypedDict DBOS
# takes in ``run_tx_step`` but does not export.
from dbos._datasource import DatasourceOptions

from ledger import storage_full

__all__ = ["DatasourceOptions", "recover_pending_workflows", "wait_out_full_disk"]


def recover_pending_workflows(executor_ids: list[str]) -> list[str]:
    """Re-enqueue every PENDING workflow of these (dead) executors, so a live worker
    adopts each; the ids of those handed over. DBOS 3.4 has no public call for
    this: its own recovery only runs at a process's start, for its own id."""
    return [h.get_workflow_id() for h in DBOS._recover_pending_workflows(executor_ids)]


def wait_out_full_disk(ds: SQLAlchemyDatasource) -> None:
    """Have the datasource's transactions (``atomic_tx``) wait a full disk out in place.

    DBOS tries a datasource transaction again, with a capped backoff, when its commit
    fails for a reason it deems transient, and otherwise records the failure as the
    step's outcome, for good: a run whose gate or finish found the disk full would
    replay that failure on every resume. A full disk is transient (an operator frees
    space), so it joins the errors DBOS tries again. DBOS has no public hook for this:
    the instance's ``_is_serialization_error`` is replaced."""
    deemed_transient = ds._is_serialization_error

    def transient(error: Exception) -> bool:
        return deemed_transient(error) or storage_full(error)

    setattr(ds, "_is_serialization_error", transient)  # noqa: B010  (an instance's hook)
