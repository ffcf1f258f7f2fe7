"""An evaluation that errs denies: the gate's checks refuse, they never crash.

A check refuses with a ``GatehouseError`` naming its code. Anything else it
raises (a shape of input it did not foresee, a pinned schema it cannot read)
would otherwise escape the gate: at submit as a server error, in the worker as
a workflow that ends in an error with its run left running, and in what-if as
a report that stops. ``refusing`` turns such an exception into a refusal of
the step (``plan_invalid``), the error recorded in its details, so the caller
treats it as it treats every other refusal. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from contracts import ErrorCode, GatehouseError, JsonValue

__all__ = ["refusing"]


@contextmanager
def refusing(step_id: str) -> Iterator[None]:
    """Refuse ``step_id`` with ``plan_invalid`` if the checks inside raise anything
    but a refusal of their own."""
    try:
        yield
    except GatehouseError:
        raise
    except Exception as exc:
        error: JsonValue = f"{type(exc).__name__}: {str(exc)[:300]}"
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step_id!r}: the gate could not decide it ({type(exc).__name__}),"
            " and a check that errs denies",
            {"step_id": step_id, "errors": [error]},
        ) from exc
