"""What the intent flow (``worker.flow._run``) reaches the world through, and what it keeps.

``Ports`` is everything the flow does that is not pure computation: the live
DBOS workflow (``worker.durable.LivePorts``) and a replay
(``worker.replay.ReplayPorts``) each implement it. ``Trace`` is the ordered
record of the calls a run consumed; its digest is the run's trace digest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from contracts import (
    Continuation,
    JsonObject,
    JsonValue,
    PlannerCall,
    PolicyProfile,
    ToolCall,
    digest_of,
)
from worker.flow._results import BeginResult, GateResult, PlanGated, RunEnd, StepRecord

__all__ = ["CallOutcome", "Ports", "Trace"]


@dataclass(frozen=True)
class CallOutcome:
    """What the tool port answers for one attempt of a step's call.

    ``result``: the call's result as the ledger recorded it (what the trace, the
    budgets and the step's record read). ``cancelled``: the cancel on record that
    stopped the attempt at its step's boundary before anything was claimed
    ({cancelled_by, reason, source}); ``result`` is empty then."""

    result: JsonObject
    cancelled: JsonObject | None = None

    @classmethod
    def stopped(cls, found: JsonObject) -> CallOutcome:
        """The attempt a cancel stopped at its boundary: nothing was called."""
        return cls({}, found)


class Ports(Protocol):
    """Everything the flow does that is not pure computation."""

    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult: ...

    def planner_call(self, call: PlannerCall) -> JsonObject:
        """A run's compile, repair or next turn, through the ledger: its recorded result."""
        ...

    def gate_and_card(self, gated: PlanGated) -> GateResult:
        """Write what the gate decided (``worker.flow._gate.gate_plan``): the plan on the
        card, or the refusal as a security episode; its result as the flow reads it."""
        ...

    def await_decision(
        self,
        run_id: str,
        plan_digest: str,
        profile: PolicyProfile,
        at: str,
        *,
        then: Callable[[], Continuation],
    ) -> tuple[bool, str] | None:
        """(approved, decided_by); None when no decision came in time, or a cancel
        woke the wait (``at``: the boundary the flow checks next). ``then``: where
        the run goes on once decided, for a port that parks the run to write down."""
        ...

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        """An interactive run's next message (``{turn, text, ends, sent_by, sent_at}``);
        None when none came in the profile's approval timeout, or a cancel woke the wait."""
        ...

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult: ...

    def tool_call(self, call: ToolCall) -> CallOutcome:
        """One attempt of a step's tool call (``call.attempt``), through the ledger."""
        ...

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        """The cancellation the run stops on at boundary ``at`` ('@compile', '@approval'
        or a plan step id): {cancelled_by, reason, source}; None to go on."""
        ...

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        """applied / not_applied: an operator's word on an in-doubt call."""
        ...

    def pause(self, seconds: float) -> None: ...

    def record_step_result(self, record: StepRecord) -> JsonObject: ...

    def finish(self, end: RunEnd) -> None: ...


class Trace:
    """The ordered calls a run consumed; its digest is the run's trace digest."""

    def __init__(self) -> None:
        self.entries: list[JsonValue] = []
        self.plan_digest: str | None = None

    def add(self, result: JsonObject) -> None:
        self.entries.append(
            [result.get("op_key"), result.get("request_digest"), result.get("response_digest")]
        )

    def resolution(self, op_key: str, outcome: str) -> None:
        self.entries.append([op_key, "resolution", outcome])

    def revision(self, plan_digest: str) -> None:
        """A repaired plan the run went on with (after its own approval)."""
        self.entries.append(["plan", plan_digest])

    def digest(self) -> str:
        return digest_of({"plan_digest": self.plan_digest, "calls": self.entries})
