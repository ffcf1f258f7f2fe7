"""The noop handler: echoes its input back.

It exists so plans, the ledger and approvals can be exercised end to end
without touching the network or starting processes.
"""

from __future__ import annotations

from contracts.execution import ExecutionEnvelope, ExecutionResult
from worker.handlers._base import HandlerContext, HandlerResult, answer

__all__ = ["run"]


def run(envelope: ExecutionEnvelope, _context: HandlerContext) -> ExecutionResult:
    """Echo the arguments: ``{"echo": arguments}``; never fails, never has side effects."""
    return answer(envelope, HandlerResult(ok=True, output={"echo": envelope.arguments}))
