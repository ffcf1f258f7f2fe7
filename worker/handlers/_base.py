"""What every handler takes and returns.

A handler performs one tool call for one plan step. It is only ever called
through the ledger (``worker/_calls.py``), after the policy gate allowed the
step, with the step's resolved input. Expected failures (a non-zero exit, an
HTTP 500, a timeout) are *results* (``ok=False`` with a code), never
exceptions: the result is recorded in the ledger like any other. A handler
raises ``GatehouseError`` only when it refuses to act (a policy check failed
at execution time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from contracts import Connector, ErrorCode, GatehouseError, JsonObject, Limits, OpencodePolicy

__all__ = [
    "Artifact",
    "Handler",
    "HandlerContext",
    "HandlerResult",
    "describe_invalid",
    "limits_of",
]


@dataclass(frozen=True)
class HandlerContext:
    op_key: str  # sha256(run_id, step_id, attempt); sent to callees as the idempotency key
    run_id: str
    step_id: str
    workspace: Path  # the run's own directory; exists; handlers never write outside it
    connector: Connector  # from the tool pool; its limits are present (the gate checked)
    # For executor sessions (opencode): the profile's executor policy, and whether
    # this turn is the timeout ladder's narrowed re-prompt.
    executor_policy: OpencodePolicy | None = None
    narrowed: bool = False


@dataclass(frozen=True)
class Artifact:
    name: str
    media_type: str
    content: bytes


@dataclass(frozen=True)
class HandlerResult:
    ok: bool
    output: JsonObject
    error_code: ErrorCode | None = None
    error_message: str | None = None
    artifacts: tuple[Artifact, ...] = field(default_factory=tuple)


Handler = Callable[[HandlerContext, JsonObject], HandlerResult]


def limits_of(ctx: HandlerContext) -> Limits:
    """The connector's limits; the gate guarantees them, this refuses if it did not."""
    if ctx.connector.limits is None:
        raise GatehouseError(
            ErrorCode.LIMITS_MISSING,
            "the connector declares no limits",
            {"connector_id": ctx.connector.connector_id},
        )
    return ctx.connector.limits


def describe_invalid(exc: ValidationError) -> str:
    """Field paths and messages only: the input itself may hold secrets."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors(include_url=False, include_input=False)
    )
