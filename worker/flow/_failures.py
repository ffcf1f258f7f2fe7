"""Soft and hard failures, as the Reach protocol defines them.

A *soft* failure is the tool's own (a non-zero exit, an HTTP error, a
timeout): the planner could recover, so the step's ``on_error`` decides
whether the run goes on. A *hard* failure ends the run whatever the step
says: the executor broke the protocol, the policy refused the call at
execution time (a destination that resolved somewhere private, a command or
permission refused, a child session), or an OpenCode turn spent past what
was left of the run's budgets and was cut short.
"""

from __future__ import annotations

from typing import Final

from contracts import ErrorCode

__all__ = ["HARD_FAILURES", "is_hard"]

HARD_FAILURES: Final = frozenset(
    {
        ErrorCode.PROTOCOL_VIOLATION,
        ErrorCode.DRIVER_NOT_ALLOWED,
        ErrorCode.DESTINATION_NOT_ALLOWED,
        ErrorCode.COMMAND_NOT_ALLOWED,
        ErrorCode.LIMITS_MISSING,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.CHILD_SESSION_REFUSED,
        ErrorCode.BUDGET_EXCEEDED,
    }
)


def is_hard(code: str | None) -> bool:
    """Whether a step that failed with ``code`` ends the run."""
    return code is not None and code in {c.value for c in HARD_FAILURES}
