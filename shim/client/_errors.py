"""What a refusal from the shim becomes on the client's side."""

from __future__ import annotations

from contracts import ErrorCode, JsonValue, RunView

__all__ = ["ApiError", "RunEndedError", "code_of", "retry_after"]

_CODES = {c.value: c for c in ErrorCode}


def code_of(wire: str) -> ErrorCode | None:
    """The closed code a wire identifier names; None for one Gatehouse never sends
    (a proxy's page, a client-side refusal such as ``unexpected_redirect``)."""
    return _CODES.get(wire)


class ApiError(Exception):
    """The shim (or something in front of it) refused a request.

    ``error_code`` is the closed :class:`~contracts.ErrorCode` the shim named, or
    None when the answer carried no code of Gatehouse's (then ``code`` holds what it
    said, or ``"unknown"``). ``retryable`` says whether sending the same request
    again can succeed; ``retry_after`` is the wait the shim asked for, if any."""

    def __init__(self, status: int, body: JsonValue, retry_after: float | None = None) -> None:
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else {}
        self.status = status
        self.code = str(err.get("code", "unknown"))
        self.error_code = code_of(self.code)
        self.message = str(err.get("message", body))
        # What the shim says to act on: known recipes, the failing path, allowed values.
        self.details: JsonValue = err.get("details")
        self.retry_after = retry_after
        super().__init__(f"HTTP {status} {self.code}: {self.message}")

    @property
    def retryable(self) -> bool:
        if self.error_code is not None:
            return self.error_code.retryable
        return self.status in (502, 503, 504)


def retry_after(status: int, header: str | None) -> float | None:
    """The seconds a retryable refusal (429 or 503) asks the client to wait, or None."""
    if status not in (429, 503):
        return None
    try:
        after = float(header or "")
    except ValueError:
        return None
    return after if 0 <= after <= 300 else None


class RunEndedError(Exception):
    """A wait's run has ended in a status other than those it waited for, so it can
    never reach them (waiting for ``waiting_approval`` on a run that already
    succeeded, say): raised at once, not when the wait's time runs out. ``view`` is
    the run as it ended."""

    def __init__(self, view: RunView, statuses: set[str]) -> None:
        self.view = view
        wanted = ", ".join(sorted(statuses))
        super().__init__(
            f"run {view.run_id} has ended {view.status.value}; it will never be {wanted}"
        )
