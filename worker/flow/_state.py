"""A run's state in the flow, and the moves every phase shares: how a run ends, a
cancel seen at a boundary, a budget crossed, the wait for a decision and the
continuation a parked run is resumed from, a new revision gated and decided.

Pure, like the rest of ``worker.flow``: everything outside goes through ``Ports``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from contracts import (
    Continuation,
    ErrorCode,
    JsonObject,
    JsonValue,
    Mode,
    Plan,
    PolicyProfile,
    RunStatus,
    ToolPool,
)
from contracts.opa_run import OpaJob
from worker.flow._budgets import Spent
from worker.flow._gate import gate_plan
from worker.flow._ports import Ports, Trace
from worker.flow._repair import Repairs
from worker.flow._results import RunEnd

__all__ = ["At", "Gate", "RunState"]


class At(NamedTuple):
    """Where a run stands: the plan (revision) it is on, its digest, the next step."""

    plan: Plan
    digest: str
    position: int


class Gate(NamedTuple):
    """What every plan of the run is gated under."""

    profile: PolicyProfile
    pool: ToolPool
    mode: Mode


class RunState:
    """One run as the flow holds it between its phases."""

    def __init__(self, run_id: str, ports: Ports) -> None:
        self.run_id = run_id
        self.ports = ports
        self.trace = Trace()
        # What the run spent of its budgets: counted from recorded call results only.
        self.spent: Spent | None = None
        self.opa: OpaJob | None = None  # the run came from an OPA archive
        # An interactive OPA run's follow-up messages so far: {turn, text, after_step}.
        self.follow_ups: list[JsonObject] = []
        # Whose decision let the current plan run (Cedar's ``context.approver``).
        self.approver: str | None = None
        # Set once the plan is gated (``go``) or from a continuation (``resume``):
        self.repairs: Repairs | None = None  # and through it, what the first planner call was asked
        self.seed = ""  # the run's recorded seed
        self.outputs: dict[str, JsonObject] = {}  # the outputs of the steps that ran

    def end(
        self,
        status: RunStatus,
        summary: list[JsonValue],
        code: str | None = None,
        message: str | None = None,
    ) -> JsonObject:
        """Every way a run ends: status, trace digest and summary episode, one commit."""
        budgets = None if self.spent is None else self.spent.view_json()
        end = RunEnd(
            self.run_id,
            status,
            summary,
            code,
            message,
            self.trace.digest(),
            budgets,
            self.opa,
            list[JsonValue](self.follow_ups),
        )
        self.ports.finish(end)
        return {"run_id": self.run_id, "status": status.value, "error_code": code, "steps": summary}

    def over_budget(self, summary: list[JsonValue]) -> JsonObject | None:
        """End the run if it has spent past one of its budgets (None: it has not)."""
        exceeded = None if self.spent is None else self.spent.crossed()
        if exceeded is None:
            return None
        code = ErrorCode.BUDGET_EXCEEDED.value
        return self.end(RunStatus.FAILED, summary, code, exceeded.message)

    def stopped(self, at: str, summary: list[JsonValue]) -> JsonObject | None:
        """At a step boundary: end the run ``cancelled`` if a cancel is on record."""
        found = self.ports.cancelled(self.run_id, at)
        return None if found is None else self.cancelled(found, at, summary)

    def cancelled(self, found: JsonObject, at: str, summary: list[JsonValue]) -> JsonObject:
        """End the run ``cancelled``: the cancel ``found`` stopped it at ``at``."""
        reason = found.get("reason")
        message = f"cancelled by {found.get('cancelled_by')} at {at}" + (
            f": {reason}" if reason else ""
        )
        return self.end(RunStatus.CANCELLED, summary, ErrorCode.RUN_CANCELLED.value, message)

    def approval(
        self,
        digest: str,
        gate: Gate,
        summary: list[JsonValue],
        at: str,
        *,
        plan: Plan,
        position: int,
    ) -> JsonObject | None:
        """Wait for the decision on ``digest`` (the digest of ``plan``, which goes on at
        step ``position`` once approved); None when approved and the stored plan is
        still that plan, else how the run ended. A cancel wakes the wait too, and
        wins over whatever the wait found (``at``: the boundary's name)."""
        profile = gate.profile
        then = self.continuation(
            at, plan=plan, digest=digest, position=position, mode=gate.mode, summary=summary
        )
        decided = self.ports.await_decision(self.run_id, digest, profile, at, then=then)
        if (stop := self.stopped(at, summary)) is not None:
            return stop
        if decided is None:
            message = f"no decision on plan {digest[:12]} within {profile.approval.timeout_s:.0f} s"
            return self.end(RunStatus.FAILED, summary, ErrorCode.APPROVAL_TIMEOUT.value, message)
        if not decided[0]:
            return self.end(RunStatus.REJECTED, summary)
        verified = self.ports.verify_plan(self.run_id, digest)
        if not verified.ok:  # the stored plan was changed after approval: run nothing
            return self.end(RunStatus.FAILED, summary, verified.error_code, verified.error_message)
        self.approver = decided[1]
        return None

    def continuation(
        self,
        at: str,
        *,
        plan: Plan,
        digest: str,
        position: int,
        mode: Mode,
        summary: list[JsonValue],
    ) -> Callable[[], Continuation]:
        """Where the run goes on from the decision at ``at`` (``resume``), for a port
        that parks the run there to write down; made only when asked for."""

        def then() -> Continuation:
            assert self.spent is not None and self.repairs is not None
            return Continuation(
                at=at,
                plan=plan,
                plan_digest=digest,
                position=position,
                outputs=dict(self.outputs),
                summary=list(summary),
                trace_plan_digest=self.trace.plan_digest,
                trace=list(self.trace.entries),
                spent=self.spent.state_json(),
                compile_call=self.repairs.compile_call,
                mode=mode,
                seed=self.seed,
                repairs_asked=self.repairs.asked,
                follow_ups=list(self.follow_ups),
                opa=self.opa,
            )

        return then

    def decide_revision(
        self,
        raw: JsonObject,
        revise: JsonObject,
        gate: Gate,
        summary: list[JsonValue],
        at: str,
        *,
        position: int,
    ) -> tuple[Plan, str] | JsonObject:
        """A new revision of the run's plan (an interactive run's next turn, an outside
        value written in) gated, on the plan card and decided at boundary ``at``:
        (plan, digest) when approved, the run going on at step ``position``, else how
        the run ended."""
        budgets = None if self.spent is None else self.spent.view_json()
        gated = self.ports.gate_and_card(
            gate_plan(self.run_id, raw, gate, revise=revise, budgets=budgets)
        )
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return self.end(RunStatus.FAILED, summary, gated.error_code, gated.error_message)
        self.trace.revision(gated.plan_digest)
        refused = self.approval(
            gated.plan_digest, gate, summary, at, plan=gated.plan, position=position
        )
        return refused if refused is not None else (gated.plan, gated.plan_digest)
