"""What every handler takes and returns: an envelope in, a result out.

A handler performs one tool call for one plan step. Only the coordinator
calls it (``worker/coordinator/executor.py``), through the ledger, after the
policy gate allowed the step. It gets an ``ExecutionEnvelope`` (the step's
resolved arguments, the connector, the op_key; bound to the run's own
workspace) and a ``HandlerContext`` (the worker's settings, a way to ask about a
cancel) and nothing else, and answers with an ``ExecutionResult``.
Expected failures (a non-zero exit, an HTTP 500, a timeout) are *results*,
never exceptions: the result is recorded in the ledger like any other. A
handler raises ``GatehouseError`` only when it refuses to act (a policy check
failed at execution time); anything else it raises is a panic, which the
coordinator turns into an ``error`` result.

Inside a handler, ``HandlerResult`` is the plain outcome of the tool;
``answer`` expresses it as the envelope's result.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field

from contracts import ErrorCode, GatehouseError, JsonObject, Limits
from contracts.execution import (
    ExecutionEnvelope,
    ExecutionResult,
    GatehouseResultExt,
    ResultArtifact,
    ResultError,
    ResultExtensions,
    ResultMetrics,
    ResultStatus,
)
from policies.step_inputs import describe_invalid
from worker.runtime import WorkerSettings

__all__ = [
    "Artifact",
    "Handler",
    "HandlerContext",
    "HandlerResult",
    "answer",
    "describe_invalid",
    "limits_of",
    "nobody",
]


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


def nobody(_run_id: str) -> str | None:
    """``cancelled_by`` for a caller that cannot ask (a handler driven on its own)."""
    return None


@dataclass(frozen=True)
class HandlerContext:
    """What a handler may use of the worker that runs it, handed in with the envelope
    by its caller (``worker.calls``): the worker's settings, and who cancelled a run,
    asked while a long step runs (an OpenCode turn stops early on it; None: nobody
    did, or it cannot be asked now). A handler reaches for nothing else: no global
    runtime and no database connection of its own; the one thing of the ledger it
    learns while it runs (the OpenCode watcher's cancel check) is ``cancelled_by``,
    which its caller answers from the ledger."""

    settings: WorkerSettings
    cancelled_by: Callable[[str], str | None] = nobody


Handler = Callable[[ExecutionEnvelope, HandlerContext], ExecutionResult]

# Codes that mean the tool ran and said no (a soft ``failure``); every other
# code means the executor could not get an answer from the tool (``error``).
_TOOL_FAILURES = frozenset({ErrorCode.HANDLER_FAILED, ErrorCode.OUTPUT_INVALID})


def status_of(outcome: HandlerResult) -> ResultStatus:
    if outcome.ok:
        return "success"
    return "failure" if outcome.error_code in _TOOL_FAILURES else "error"


def answer(envelope: ExecutionEnvelope, outcome: HandlerResult) -> ExecutionResult:
    """The envelope's result for what the tool did. Duration is the coordinator's to measure."""
    error = None
    if not outcome.ok:
        code = outcome.error_code or ErrorCode.HANDLER_FAILED
        error = ResultError(code=code.value, message=(outcome.error_message or code.value)[:4000])
    return ExecutionResult(
        envelope_id=envelope.id,
        status=status_of(outcome),
        output=outcome.output,
        error=error,
        metrics=ResultMetrics(duration_ms=0),
        extensions=ResultExtensions(
            gatehouse=GatehouseResultExt(
                artifacts=[
                    ResultArtifact(
                        name=a.name,
                        media_type=a.media_type,
                        content_b64=base64.b64encode(a.content).decode("ascii"),
                    )
                    for a in outcome.artifacts
                ]
            )
        ),
    )


def limits_of(envelope: ExecutionEnvelope) -> Limits:
    """The connector's limits; the gate guarantees them, this refuses if it did not."""
    connector = envelope.gatehouse.connector
    if connector.limits is None:
        raise GatehouseError(
            ErrorCode.LIMITS_MISSING,
            "the connector declares no limits",
            {"connector_id": connector.connector_id},
        )
    return connector.limits
