"""In-doubt resolution, replay and fork: what an operator sends and gets back."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed, Digest, Identifier, ShortText

__all__ = [
    "CallResolution",
    "CallResolved",
    "ForkAccepted",
    "ForkRequest",
    "ReplayDivergence",
    "ReplayReport",
]

Outcome = Literal["applied", "not_applied"]


class CallResolution(Closed):
    """Body of POST /calls/{op_key}/resolve: what really happened to an in-doubt call.

    ``applied``: the callee did act; the step counts as done and is not sent again.
    ``not_applied``: it did not; the run sends the call again as a new attempt.
    """

    outcome: Outcome
    note: ShortText | None = None
    resolved_by: Identifier = "anonymous"


class CallResolved(Closed):
    op_key: Digest
    run_id: str
    step_id: str
    outcome: Outcome
    resolved_by: str
    recorded: bool  # False when the same resolution was already on record


class ReplayDivergence(Closed):
    """Where a replay left the recorded path."""

    kind: Literal["missing_entry", "request_digest", "trace_digest", "policy_digest"]
    step_id: str | None
    op_key: Digest | None
    recorded_digest: str | None
    replayed_digest: str | None
    message: str


class ReplayReport(Closed):
    run_id: str
    match: bool
    recorded_trace_digest: Digest | None
    replayed_trace_digest: Digest | None
    calls: int  # calls the replay served from the ledger
    outbound_calls: int  # calls that left the process: always 0 in a replay
    divergences: list[ReplayDivergence]
    # The rules the replay held the run to: "recorded", the profile and tool pool
    # versions it ran under; "current", today's files (would it still pass?).
    rules: Literal["recorded", "current"] = "recorded"


class ForkRequest(Closed):
    """Body of POST /runs/{id}/fork: a new run that reuses the parent's results
    before plan step ``from_step`` (1-based) and calls live from it on."""

    from_step: int = Field(ge=1, le=200)
    requested_by: Identifier = "anonymous"


class ForkAccepted(Closed):
    run_id: str
    parent_run_id: str
    from_step: int
    status: str
    links: dict[str, str]
