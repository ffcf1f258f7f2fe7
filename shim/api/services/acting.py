"""What several routes share: the links of a run, and acting as the token's identity."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from sqlalchemy.engine import Connection

from contracts import ErrorCode, GatehouseError, Role
from ledger import cancels
from shim.tokens import Identity

__all__ = ["acting_as", "lock_own_run", "run_links"]

M = TypeVar("M", bound=BaseModel)


def run_links(run_id: str, who: Identity | None = None) -> dict[str, str]:
    """Where a run's reader can go from it; ``who``: the reader, whose roles leave out
    the decisions it may not make (None: every link)."""
    decides = who is None or who.has(Role.APPROVER)
    decisions = {"approve": f"/approve/{run_id}", "reject": f"/reject/{run_id}"}
    return {
        "self": f"/runs/{run_id}",
        **(decisions if decides else {}),
        "cancel": f"/runs/{run_id}/cancel",
        "ledger": f"/runs/{run_id}/ledger",
        "episodes": f"/runs/{run_id}/episodes",
        "artifacts": f"/runs/{run_id}/artifacts",
    }


def acting_as(model: M, field: str, who: Identity) -> M:
    """The acting identity is the token's: a body may repeat it, never name another."""
    if field in model.model_fields_set and getattr(model, field) != who.name:
        raise GatehouseError(
            ErrorCode.FORBIDDEN,
            f"{field} names {getattr(model, field)!r} but the token belongs to {who.name!r}",
        )
    return model.model_copy(update={field: who.name})


def lock_own_run(conn: Connection, run_id: str, who: Identity, may: str) -> cancels.LockedRun:
    """The run's row lock for the rest of the transaction, for its submitter or an
    operator (``may``: what a submitter may do, for the refusal's message)."""
    run = cancels.lock_run(conn, run_id)
    if run is None:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    if not who.has(Role.OPERATOR) and run.submitted_by != who.name:
        raise GatehouseError(
            ErrorCode.FORBIDDEN,
            f"{who.name} may {may} only the runs it submitted (or be an operator)",
        )
    return run
