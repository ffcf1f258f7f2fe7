"""A fake of the flow's ports: the whole run in memory, scripted, in milliseconds.

``FakePorts`` implements ``worker.flow.Ports`` with no database, no DBOS and no
handler: the planner's answers, each tool call's outcome per attempt, the
people's decisions, cancels, an operator's resolutions and an interactive run's
messages are given up front, and every port call is logged in order. The flow
then runs exactly as it does live or in a replay, and a test reads what it did:
the log, the step records, the plan cards and how the run ended.

Like the live ports, a tool call answers a cancel seen at its step's boundary
before anything is called, and writes its step's record with the call when the
call settles the step (``recorded``). The gate is the real one
(``policies.repair.gated_plan``), so a plan the fake is given must pass it or
be refused as the live gate would refuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contracts import (
    Continuation,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PlannerCall,
    PolicyProfile,
    ToolCall,
    ToolPool,
    digest_of,
)
from worker.flow import BeginResult, CallOutcome, GateResult, PlanGated, RunEnd, StepRecord

__all__ = ["FakePorts", "Outcome", "failed", "ok", "planned"]

# Codes after which the flow may call again or wait for a person: the live tool call
# does not write its step's record with such a result.
_NOT_FINAL = frozenset(
    {
        ErrorCode.UPSTREAM_UNAVAILABLE.value,
        ErrorCode.CALL_IN_DOUBT.value,
        ErrorCode.TURN_INTERRUPTED.value,
        ErrorCode.OC_STALLED.value,
    }
)


@dataclass(frozen=True)
class Outcome:
    """What one call answers: the response the ledger would record."""

    ok: bool = True
    output: JsonObject = field(default_factory=dict)
    error_code: str | None = None
    error_message: str | None = None
    duration_ms: int = 10

    def response(self) -> JsonObject:
        return {
            "ok": self.ok,
            "output": self.output,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "artifacts": [],
        }


def ok(**output: JsonValue) -> Outcome:
    return Outcome(ok=True, output=dict(output))


def failed(code: ErrorCode, message: str = "", **output: JsonValue) -> Outcome:
    return Outcome(ok=False, output=dict(output), error_code=code.value, error_message=message)


def planned(plan: JsonObject, **usage: JsonValue) -> Outcome:
    """A planner's answer: the plan, and the usage a model reports."""
    output: JsonObject = {"plan": plan}
    if usage:
        output["usage"] = dict(usage)
    return Outcome(ok=True, output=output)


@dataclass
class FakePorts:
    """The flow's ports, scripted. Unscripted tool calls succeed with ``{}``."""

    profile: PolicyProfile
    pool: ToolPool
    seed: str = "fixed-seed"
    # The planner's answer per ledger step id (@compile, @repair, @repair-1, @compile-2…).
    planner: dict[str, Outcome] = field(default_factory=dict)
    planner_target: str = "recipe"
    # Each step's outcomes, attempt after attempt (the last one repeats).
    tools: dict[str, list[Outcome]] = field(default_factory=dict)
    # The decision per boundary (@approval, @approval-1, @approval-turn-2…):
    # (approved, decided_by); None: no decision in time. Unscripted: approved by "ann".
    decisions: dict[str, tuple[bool, str] | None] = field(default_factory=dict)
    # A cancel on record, seen at this boundary: {cancelled_by, reason, source}.
    cancels: dict[str, JsonObject] = field(default_factory=dict)
    # An operator's word per in-doubt step id: applied / not_applied.
    resolutions: dict[str, str] = field(default_factory=dict)
    # An interactive run's messages per turn: {text, ends}; unscripted: the session ends.
    messages: dict[int, JsonObject] = field(default_factory=dict)
    # Plan digests whose stored plan was changed after approval.
    tampered: set[str] = field(default_factory=set)
    begin_error: GatehouseError | None = None

    log: list[str] = field(default_factory=list)
    sent: list[JsonObject] = field(default_factory=list)  # every tool call, as sent
    asked: list[JsonObject] = field(default_factory=list)  # every planner call, as sent
    cards: list[PlanGated] = field(default_factory=list)  # what the gate decided, as carded
    records: list[StepRecord] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)
    # the continuation the flow offered at each decision, by boundary
    continuations: dict[str, Continuation] = field(default_factory=dict)
    ended: RunEnd | None = None

    # -- the ports
    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult:
        self.log.append("begin")
        if self.begin_error is not None:
            exc = self.begin_error
            return BeginResult(
                ok=False, seed=self.seed, error_code=exc.code.value, error_message=exc.message
            )
        return BeginResult(
            ok=True,
            profile=self.profile,
            profile_digest=digest_of(self.profile.model_dump(mode="json")),
            tool_pool=self.pool,
            tool_pool_digest=digest_of(self.pool.model_dump(mode="json")),
            seed=self.seed,
        )

    def planner_call(self, call: PlannerCall) -> JsonObject:
        call_id = call.call_id
        self.log.append(f"planner {call_id}")
        raw = call.model_dump(mode="json", exclude_none=True)  # what a test reads as asked
        self.asked.append(raw)
        outcome = self.planner.get(call_id)
        if outcome is None:
            outcome = failed(ErrorCode.PLANNER_FAILED, f"no answer scripted for {call_id}")
        return self._result(call.run_id, call_id, 1, self.planner_target, raw, outcome)

    def gate_and_card(self, gated: PlanGated) -> GateResult:
        if not gated.ok:
            self.log.append(f"gate refused {gated.error_code}")
        else:
            assert gated.plan is not None
            self.log.append(f"card {len(gated.plan.steps)} step(s)")
            self.cards.append(gated)
        return gated.result()

    def await_decision(
        self,
        run_id: str,
        plan_digest: str,
        profile: PolicyProfile,
        at: str,
        *,
        then: Callable[[], Continuation],
    ) -> tuple[bool, str] | None:
        self.log.append(f"await {at}")
        # what a live port would park with here, for a test to resume from
        self.continuations[at] = then()
        return self.decisions.get(at, (True, "ann"))

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        self.log.append(f"await @input-{turn}")
        found = self.messages.get(turn)
        if found is None:
            return None
        return {"turn": turn, "sent_by": "sam", "sent_at": "2026-01-01T00:00:00Z", **found}

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult:
        self.log.append("verify")
        if plan_digest in self.tampered:
            return GateResult(
                ok=False,
                error_code=ErrorCode.PLAN_TAMPERED.value,
                error_message="the stored plan no longer hashes to the approved digest",
            )
        return GateResult(ok=True)

    def tool_call(self, call: ToolCall) -> CallOutcome:
        step_id, attempt, boundary = call.step_id, call.attempt, call.boundary
        if boundary is not None and boundary in self.cancels:
            self.log.append(f"cancelled at {boundary}")
            return CallOutcome.stopped(self.cancels[boundary])
        self.log.append(f"call {step_id}#{attempt}")
        raw = call.model_dump(mode="json", exclude_none=True)  # what a test reads as sent
        self.sent.append(raw)
        script = self.tools.get(step_id) or [ok()]
        outcome = script[min(attempt, len(script)) - 1]
        result = self._result(call.run_id, step_id, attempt, call.driver_kind.value, raw, outcome)
        if call.record is not None and result.get("error_code") not in _NOT_FINAL:
            result["recorded"] = {
                "ok": result["ok"],
                "error_code": result["error_code"],
                "error_message": result["error_message"],
            }
            self.log.append(f"record {step_id} (with its call)")
        return CallOutcome(result)

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        found = self.cancels.get(at)
        if found is not None:
            self.log.append(f"cancelled at {at}")
        return found

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        self.log.append(f"await resolution {step_id}")
        return self.resolutions[step_id]

    def pause(self, seconds: float) -> None:
        self.log.append("pause")
        self.pauses.append(seconds)

    def record_step_result(self, record: StepRecord) -> JsonObject:
        self.log.append(f"record {record.step_id}")
        self.records.append(record)
        outcome = record.outcome
        return {
            "ok": bool(outcome.get("ok")),
            "error_code": outcome.get("error_code"),
            "error_message": outcome.get("error_message"),
        }

    def finish(self, end: RunEnd) -> None:
        self.log.append(f"finish {end.status.value}")
        self.ended = end

    # -- what a call answers, shaped as the ledger's read-through returns it
    @staticmethod
    def _result(
        run_id: str, step_id: str, attempt: int, target: str, raw: JsonObject, outcome: Outcome
    ) -> JsonObject:
        response = outcome.response()
        return {
            "op_key": f"{run_id}/{step_id}/{attempt}",
            "step_id": step_id,
            "target": target,
            "attempt": attempt,
            "duration_ms": outcome.duration_ms,
            "from_ledger": False,
            "request_digest": digest_of(raw),
            "response_digest": digest_of(response),
            **response,
        }
