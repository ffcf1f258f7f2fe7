"""The flow's ports, live: a ledgered call, or a durable DBOS step, message wait or sleep.

Some steps answer more than their port asks, in the same commit (see
``LivePorts``). The run id is the workflow id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dbos import DBOS

from contracts import (
    APPROVAL_TOPIC,
    RESOLUTION_TOPIC,
    Continuation,
    Decision,
    JsonObject,
    PolicyProfile,
    RunStatus,
)
from worker.durable import _records as rec
from worker.durable._calls import opa_pack, planner_call, tool_call
from worker.durable._cancel import COMPILE, end_workflow
from worker.flow import BeginResult, GateResult, Parked, PlanGated, RunEnd, StepRecord
from worker.runtime import RUN, maybe_crash, runtime

__all__ = ["LivePorts"]

# How long one wait for an operator's resolution lasts before the row is re-read.
_RESOLUTION_RECHECK_S = 60.0


class LivePorts:
    """The flow's ports as DBOS steps (see ``worker.flow.Ports``).

    Some steps answer more than their port asks, in the same commit: ``begin``
    checks the ``@compile`` boundary for a cancel, and the approval wait's step
    records the decision, checks its boundary and verifies the approved plan.
    Those answers are held here and given to the port that asks next
    (``cancelled``, ``verify_plan``) instead of a step of its own. They come
    from checkpointed steps, so a recovered workflow is given the same.

    A split run's ports (``parks``) never wait in place: a wait nobody has
    answered yet parks the run and raises ``Parked`` (its stretch ends there),
    at a decision with the continuation the next stretch starts from; ``wait``
    is which of the flow's waits comes next (``StretchPorts`` sets it).
    A run enqueued before runs were split waits in place, as it always did,
    until it ends."""

    def __init__(self, *, parks: bool = False) -> None:
        self._cancel_seen: dict[str, JsonObject | None] = {}
        self._verified: dict[str, GateResult] = {}
        self.parks = parks
        self.wait = rec.Wait(0, None, None)
        # The decision the hand-off took at the wait this stretch resumes at, its
        # records already written (``StretchJob.decided``): answered once, no record.
        self.decided: JsonObject | None = None

    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult:
        begun, cancelled = rec.begin_run(run_id, profile_id, tool_pool_id, COMPILE)
        self._cancel_seen[COMPILE] = cancelled
        return begun

    planner_call = staticmethod(planner_call)  # the call itself, as tool_call below

    def gate_and_card(self, gated: PlanGated) -> GateResult:
        return rec.gate_and_card(gated)

    def await_decision(
        self,
        run_id: str,
        plan_digest: str,
        profile: PolicyProfile,
        at: str,
        *,
        then: Callable[[], Continuation],
    ) -> tuple[bool, str] | None:
        crash = runtime().settings.crash_point
        if not self.parks:
            return self._decision_in_place(run_id, plan_digest, profile, at)
        maybe_crash(crash, "approval_wait", RUN)
        given, self.decided = self.decided, None
        if given is not None and given.get("plan_digest") == plan_digest:
            # taken in the hand-off's transaction, with no cancel on record and the
            # stored plan checked there under the same row lock
            return self._taken(
                {**given, "cancelled": None, "verified": {"ok": True}}, plan_digest, at
            )
        wait = replace(self.wait, timeout_s=profile.approval.timeout_s)
        taken = rec.decision_or_park(run_id, plan_digest, at, wait, then)
        if taken.get("parked"):
            raise Parked(at, wait.index)
        return self._taken(taken, plan_digest, at)

    def _decision_in_place(
        self, run_id: str, plan_digest: str, profile: PolicyProfile, at: str
    ) -> tuple[bool, str] | None:
        """A run enqueued before runs were split: it waits here, holding its slot."""
        crash = runtime().settings.crash_point
        waited = 0.0
        taken = rec.take_decision(run_id, plan_digest, at)
        while taken["decision"] is None and taken["cancelled"] is None:
            maybe_crash(crash, "approval_wait", RUN)
            if waited >= profile.approval.timeout_s:
                rec.expire_plan_card(run_id)
                return None
            chunk = min(profile.approval.recheck_s, profile.approval.timeout_s - waited)
            if DBOS.recv(APPROVAL_TOPIC, timeout_seconds=chunk) is None:
                waited += chunk
            taken = rec.take_decision(run_id, plan_digest, at)
        return self._taken(taken, plan_digest, at)

    def _taken(self, taken: JsonObject, plan_digest: str, at: str) -> tuple[bool, str] | None:
        """What the flow is told of a decision taken (or a cancel that came first);
        the cancel check and the plan check it made are held for the ports asked next."""
        cancelled = taken["cancelled"]
        self._cancel_seen[at] = cancelled if isinstance(cancelled, dict) else None
        verified = taken["verified"]
        if isinstance(verified, dict):
            self._verified[plan_digest] = GateResult.model_validate(verified)
        if taken["decision"] is None:
            return None  # a cancel came first, or the card expired: the flow ends the run
        maybe_crash(runtime().settings.crash_point, "after_approval", RUN)
        return taken["decision"] == Decision.APPROVED.value, str(taken["decided_by"])

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        if not self.parks:
            return self._message_in_place(run_id, turn, profile)
        wait = replace(self.wait, timeout_s=profile.approval.timeout_s)
        out = rec.message_or_park(run_id, turn, wait)
        if out.get("parked"):
            raise Parked(f"@input-{turn}", wait.index)
        found = out.get("message")
        return found if isinstance(found, dict) else None

    def _message_in_place(
        self, run_id: str, turn: int, profile: PolicyProfile
    ) -> JsonObject | None:
        found = rec.read_message(run_id, turn)
        if found is None:
            rec.wait_for_input(run_id)
        waited = 0.0
        while found is None:
            if waited >= profile.approval.timeout_s:
                return None  # nobody wrote: the session is over
            chunk = min(profile.approval.recheck_s, profile.approval.timeout_s - waited)
            if DBOS.recv(APPROVAL_TOPIC, timeout_seconds=chunk) is None:
                waited += chunk
            elif rec.cancel_check(run_id, f"@input-{turn}") is not None:
                return None  # woken by a cancel: the flow ends the run next
            found = rec.read_message(run_id, turn)
        rec.took_message(run_id)
        return found

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult:
        held = self._verified.pop(plan_digest, None)
        return held if held is not None else rec.verify_plan(run_id, plan_digest)

    # The port is the call itself, not a method around it: a frame less between the flow
    # and the claim's INSERT (docs/architecture.md, "Exactly once: the call ledger").
    tool_call = staticmethod(tool_call)

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        if at in self._cancel_seen:  # answered with the step before, in its commit
            return self._cancel_seen.pop(at)
        return rec.cancel_check(run_id, at)

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        if self.parks:
            wait = replace(self.wait, timeout_s=None)
            out = rec.resolution_or_park(run_id, op_key, step_id, wait)
            if out.get("parked"):
                raise Parked(op_key, wait.index)
            return str(out["resolution"])
        rec.needs_operator(run_id, op_key, step_id)
        resolved = rec.read_resolution(op_key)
        while resolved is None:
            DBOS.recv(RESOLUTION_TOPIC, timeout_seconds=_RESOLUTION_RECHECK_S)
            resolved = rec.read_resolution(op_key)
        rec.resume_after_resolution(run_id)
        return resolved

    def pause(self, seconds: float) -> None:
        DBOS.sleep(seconds)

    def record_step_result(self, record: StepRecord) -> JsonObject:
        return rec.record_step_result(record)

    def finish(self, end: RunEnd) -> None:
        if end.opa is not None:  # before the run is terminal: a client then finds it packed
            opa_pack(
                {
                    "run_id": end.run_id,
                    "status": end.status.value,
                    "error_code": end.error_code,
                    "steps": list(end.steps),
                    "opa": end.opa.model_dump(mode="json"),
                    "follow_ups": end.follow_ups or [],
                }
            )
        if rec.finish_run(end) is RunStatus.CANCELLED:
            end_workflow()  # after the run's row is terminal: DBOS agrees
