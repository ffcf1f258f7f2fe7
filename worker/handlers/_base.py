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

from contracts import Connector, ErrorCode, JsonObject

__all__ = ["Artifact", "Handler", "HandlerContext", "HandlerResult"]


@dataclass(frozen=True)
class HandlerContext:
    op_key: str  # sha256(run_id, step_id, attempt); sent to callees as the idempotency key
    run_id: str
    step_id: str
    workspace: Path  # the run's own directory; exists; handlers never write outside it
    connector: Connector  # from the tool pool; its limits are present (the gate checked)


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
