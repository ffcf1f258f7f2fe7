"""What the handler unit tests share: an envelope to a handler, held to the protocol
as the coordinator holds it, and the connector a test step runs under."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import Connector, DriverKind, ErrorCode, Limits
from contracts.opa_run import OpaJob
from tests.support.handler_context import handler_context
from worker.coordinator.envelopes import build_envelope
from worker.coordinator.executor import Delivered, check
from worker.handlers import Handler

__all__ = ["OP_KEY", "Ctx", "assert_failed", "ctx", "run"]

OP_KEY = "a" * 64


@dataclass(frozen=True)
class Ctx:
    workspace: Path
    connector: Connector


def run(handler: Handler, ctx: Ctx, arguments: Any, opa: OpaJob | None = None) -> Delivered:
    """One envelope to the handler (of a step in an OPA run with ``opa``), its result
    held to the protocol as the coordinator does."""
    envelope = build_envelope(
        run_id="run-1",
        step_id="step-1",
        op_key=OP_KEY,
        attempt=1,
        connector=ctx.connector,
        arguments=arguments,
        opa=opa,
    ).bound(ctx.workspace)
    return check(envelope, handler(envelope, handler_context()))


def ctx(ws: Path, dests: Any = (), cmds: Any = (), timeout_s: float = 2.0, cap: int = 10**6) -> Ctx:
    connector = Connector(
        connector_id="c",
        driver_kind=DriverKind.RESTRICTED_SHELL if cmds else DriverKind.HTTP,
        description="test",
        limits=Limits(timeout_s=timeout_s, max_output_bytes=cap),
        destinations=list(dests),
        commands=list(cmds),
    )
    return Ctx(ws, connector)


def assert_failed(result: Delivered, code: ErrorCode = ErrorCode.HANDLER_FAILED) -> None:
    assert result.ok is False
    assert result.error_code is code, result.error_message
