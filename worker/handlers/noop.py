"""The noop handler: echoes its input back.

It exists so plans, the ledger and approvals can be exercised end to end
without touching the network or starting processes.
"""

from __future__ import annotations

from contracts import JsonObject
from worker.handlers._base import HandlerContext, HandlerResult

__all__ = ["run"]


def run(ctx: HandlerContext, step_input: JsonObject) -> HandlerResult:
    """Return ``{"echo": step_input}``; never fails and never has side effects."""
    del ctx  # part of the Handler signature; nothing here depends on it
    return HandlerResult(ok=True, output={"echo": step_input})
