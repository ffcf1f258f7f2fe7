"""Delivering an envelope to its handler: the only place a handler is called.

Whatever the handler does, the coordinator ends up with a result it can
record:

* a result that validates against ``env.execution_result_v1`` and answers
  this envelope is taken as it is (its duration measured here);
* a ``GatehouseError`` is the handler refusing to act: an ``error`` result
  with that code;
* any other exception is a panic: an ``error`` result ``executor_panic``;
  the traceback goes to a ``system_log`` artifact and nowhere else, and the
  worker carries on;
* anything else returned (not a result, schema-invalid, another envelope's
  result, an unknown error code) is a protocol violation: a hard failure
  that ends the run.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from contracts import DriverKind, ErrorCode, GatehouseError, JsonObject, validate_instance
from contracts.execution import ExecutionEnvelope, ExecutionResult, ResultError, ResultMetrics
from worker.handlers import Artifact, Handler, HandlerContext
from worker.handlers.registry import HANDLERS

__all__ = ["Delivered", "check", "deliver", "handlers", "install_handlers", "refused_result"]

_log = logging.getLogger("gatehouse.coordinator")
RESULT_SCHEMA = "env.execution_result_v1"
_TRACE_CAP = 64 * 1024


@dataclass(frozen=True)
class Delivered:
    """A validated result, with the artifacts its handler produced (decoded)."""

    result: ExecutionResult
    artifacts: tuple[Artifact, ...] = ()

    @property
    def ok(self) -> bool:
        return self.result.status == "success"

    @property
    def error_code(self) -> ErrorCode | None:
        return None if self.result.error is None else ErrorCode(self.result.error.code)

    @property
    def error_message(self) -> str | None:
        return None if self.result.error is None else self.result.error.message

    @property
    def output(self) -> JsonObject:
        return self.result.output


def _error(
    envelope: ExecutionEnvelope, code: ErrorCode, message: str, output: JsonObject
) -> ExecutionResult:
    return ExecutionResult(
        envelope_id=envelope.id,
        status="error",
        output=output,
        error=ResultError(code=code.value, message=message[:4000]),
        metrics=ResultMetrics(duration_ms=0),
    )


def refused_result(envelope: ExecutionEnvelope, exc: GatehouseError) -> ExecutionResult:
    """The result of a handler that refused to act."""
    return _error(envelope, exc.code, exc.message, exc.details)


def _violation(envelope: ExecutionEnvelope, problems: list[str]) -> Delivered:
    first = problems[0] if problems else "no result"
    message = f"the {envelope.gatehouse.driver_kind.value} handler broke the protocol: {first}"
    output: JsonObject = {"problems": list(problems[:20])}
    return Delivered(_error(envelope, ErrorCode.PROTOCOL_VIOLATION, message, output))


def check(envelope: ExecutionEnvelope, returned: object) -> Delivered:
    """Hold what the handler returned to the protocol."""
    if not isinstance(returned, ExecutionResult):
        return _violation(envelope, [f"returned {type(returned).__name__}, not an ExecutionResult"])
    problems: list[str] = []
    try:
        dumped = returned.model_dump(mode="json")
        validate_instance(RESULT_SCHEMA, dumped, ErrorCode.PROTOCOL_VIOLATION)
    except GatehouseError as exc:
        errors = exc.details.get("errors")
        problems.extend(str(e) for e in (errors if isinstance(errors, list) else [exc.message]))
    if returned.envelope_id != envelope.id:
        problems.append(f"answers envelope {returned.envelope_id!r}, not {envelope.id!r}")
    if (returned.status == "success") != (returned.error is None):
        problems.append(f"status {returned.status!r} with error {returned.error!r}")
    if returned.error is not None:
        try:
            ErrorCode(returned.error.code)
        except ValueError:
            problems.append(f"unknown error code {returned.error.code!r}")
    artifacts: list[Artifact] = []
    for item in returned.extensions.gatehouse.artifacts:
        try:
            content = base64.b64decode(item.content_b64 or "", validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"artifact {item.name!r} is not base64")
            continue
        artifacts.append(Artifact(name=item.name, media_type=item.media_type, content=content))
    if problems:
        return _violation(envelope, problems)
    return Delivered(returned, tuple(artifacts))


def deliver(
    envelope: ExecutionEnvelope, handlers: Mapping[DriverKind, Handler], context: HandlerContext
) -> Delivered:
    """Call the envelope's handler once, with ``context``; always come back with a
    valid result."""
    kind = envelope.gatehouse.driver_kind
    handler = handlers.get(kind)
    started = time.monotonic()
    if handler is None:
        refusal = GatehouseError(
            ErrorCode.DRIVER_NOT_ALLOWED, f"this build has no handler for driver {kind.value!r}"
        )
        delivered = Delivered(refused_result(envelope, refusal))
    else:
        try:
            delivered = check(envelope, handler(envelope, context))
        except GatehouseError as exc:  # the handler refused to act
            delivered = Delivered(refused_result(envelope, exc))
        except Exception as exc:  # noqa: BLE001 - a panic: recovered, recorded, the worker goes on
            _log.warning(
                "handler %s panicked on %s: %s", kind.value, envelope.id, type(exc).__name__
            )
            tb = "".join(traceback.format_exception(exc)).encode("utf-8", errors="replace")
            message = f"the {kind.value} handler raised {type(exc).__name__}"
            panic = _error(
                envelope, ErrorCode.EXECUTOR_PANIC, message, {"exception": type(exc).__name__}
            )
            delivered = Delivered(panic, (Artifact("panic.log", "text/plain", tb[-_TRACE_CAP:]),))
    duration = ResultMetrics(duration_ms=int((time.monotonic() - started) * 1000))
    return Delivered(delivered.result.model_copy(update={"metrics": duration}), delivered.artifacts)


_installed: list[Mapping[DriverKind, Handler]] = []


def install_handlers(replacing: Mapping[DriverKind, Handler] | None) -> None:
    """Deliver to ``replacing`` instead of the static registry (tests' own handlers,
    through ``worker.app.launch``); None: the static registry again."""
    _installed.clear()
    if replacing is not None:
        _installed.append(replacing)


def handlers() -> Mapping[DriverKind, Handler]:
    """The handlers tool calls are delivered to: the static registry
    (``worker/handlers/registry.py``) unless a test installed its own."""
    return _installed[0] if _installed else HANDLERS
