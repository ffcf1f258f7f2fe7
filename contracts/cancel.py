"""Cancelling a run: what the submitter or an operator sends, and what it gets back."""

from __future__ import annotations

from typing import Literal

from contracts._base import Closed, Identifier, ShortText

__all__ = ["CancelAccepted", "CancelRequest", "CancelSource"]

# Who asked: Gatehouse's own route, or DBOS (``dbos workflow cancel``, found by a sweep).
CancelSource = Literal["gatehouse", "dbos"]


class CancelRequest(Closed):
    """Body of POST /runs/{id}/cancel (the body may be empty: ``{}``)."""

    reason: ShortText | None = None
    cancelled_by: Identifier = "anonymous"


class CancelAccepted(Closed):
    """The cancellation on record for a run.

    ``status`` is ``cancelled`` once the run has ended cancelled, ``cancelling``
    while a worker has yet to reach the run's next step boundary (or its wait).
    ``recorded`` is False when this run already had a cancellation on record:
    the answer then describes that one (cancel is idempotent).
    """

    run_id: str
    status: Literal["cancelling", "cancelled"]
    cancelled_by: str
    reason: str | None
    source: CancelSource
    requested_at: str
    recorded: bool
