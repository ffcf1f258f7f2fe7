"""The intent flow: compile → gate → plan card → wait → execute → evidence.

Orchestration only, written once and run through ``Ports``:

* live, as the DBOS workflow (``worker.durable``): every port is a ledgered
  call, a record of ours, a message wait or a durable sleep; a split run's
  later stretch starts at the decision it parked at, from the continuation its
  park wrote (``resume_intent``);
* in a replay (``worker.replay``): every call is served from the ledger by
  op_key and nothing is written or sent;
* in the flow's own tests, through a fake (``tests/support/fake_ports.py``).

No clock, randomness, network or file access here: every such thing is a
port, and random choices are drawn from the run's recorded seed, so a
recovered workflow and a replay take exactly the same path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from contracts import (
    Continuation,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    JsonValue,
    Mode,
    OnError,
    Plan,
    PlannerCall,
    PolicyProfile,
    RunStatus,
    ToolPool,
)
from contracts.opa_run import OpaJob
from policies.cedar_gate import approved
from policies.gate import check_step
from policies.taint import check_resolved, outside_data
from worker.flow._budgets import Spent
from worker.flow._failures import is_hard
from worker.flow._inputs import fresh_steps, resolve_input
from worker.flow._ports import Ports, Trace
from worker.flow._repair import Repairs
from worker.flow._results import RunEnd
from worker.flow._seed import planner_seed
from worker.flow._settle import cut_at, settle
from worker.flow._step import refusal_outcome, step_call, step_record

__all__ = ["resume_intent", "run_intent"]


class Gate(NamedTuple):
    """What every plan of the run is gated under."""

    profile: PolicyProfile
    pool: ToolPool
    mode: Mode


def run_intent(job: IntentJob, run_id: str, ports: Ports) -> JsonObject:
    """The whole flow of one run. ``run_id`` is the workflow's own id: a fork
    runs the parent's job under a new id."""
    return _Run(run_id, ports).go(job)


def resume_intent(then: Continuation, run_id: str, ports: Ports) -> JsonObject:
    """The flow of a split run from the decision it parked at, as its park wrote it
    down (``then``): the decision taken, then the rest of the run. The same path
    as ``run_intent`` from that decision on: a replay, which runs the whole flow,
    takes it too and reaches the same trace digest."""
    return _Run(run_id, ports).resume(then)


class _Run:
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

    def go(self, job: IntentJob) -> JsonObject:
        req, run_id, ports = job.request, self.run_id, self.ports
        self.opa = job.opa
        begun = ports.begin(run_id, req.policy_profile, req.tool_pool)
        if not begun.ok or begun.profile is None or begun.tool_pool is None:
            return self.end(RunStatus.FAILED, [], begun.error_code, begun.error_message)
        profile, pool = begun.profile, begun.tool_pool
        seed = begun.seed or ""
        try:  # the shim refused a widening intent already; this holds for any caller
            limits = profile.budgets.narrowed(req.budgets)
        except GatehouseError as exc:
            return self.end(RunStatus.FAILED, [], exc.code.value, exc.message)
        self.spent = spent = Spent(limits, profile.prices)
        if (stop := self.stopped("@compile", [])) is not None:
            return stop

        # 1 compile: a supplied plan (run-plan) or the planner's, through the ledger
        compile_call = PlannerCall(
            run_id=run_id,
            recipe_id=req.recipe,
            objective=req.objective,
            parameters=req.parameters,
            profile=profile,
            tool_pool=pool,
            seed=planner_seed(seed, run_id),
        )
        repairs = Repairs(ports, self.trace, compile_call, spent)
        self.repairs, self.seed = repairs, seed
        repaired = False
        if req.plan is not None:
            raw_plan: JsonObject = req.plan.model_dump(mode="json")
        else:
            compiled = ports.planner_call(compile_call)
            self.trace.add(compiled)
            spent.add_call(compiled, tool=False)
            output = compiled.get("output")
            plan_value = output.get("plan") if isinstance(output, dict) else None
            if not compiled.get("ok") or not isinstance(plan_value, dict):
                code = str(compiled.get("error_code") or ErrorCode.PLANNER_FAILED.value)
                message = str(compiled.get("error_message") or "")
                return self.end(RunStatus.FAILED, [], code, message)
            # A plan the gate would refuse gets exactly one repair call.
            planner = str(compiled.get("target") or "")
            raw_plan, repaired = repairs.compiled(plan_value, planner, profile, pool)
            if (stopped := self.over_budget([])) is not None:
                return stopped

        # 2 gate + 3 plan card
        gated = ports.gate_and_card(
            run_id, raw_plan, profile, pool, req.mode, repaired=repaired, budgets=spent.view_json()
        )
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return self.end(RunStatus.FAILED, [], gated.error_code, gated.error_message)
        plan, digest = gated.plan, gated.plan_digest
        self.trace.plan_digest = digest
        if req.mode is Mode.PLAN_ONLY:
            return self.stopped("@approval", []) or self.end(RunStatus.PLANNED, [])

        # 4 durable wait: the plan_approvals row decides; a message only wakes us early
        summary: list[JsonValue] = []
        gate = Gate(profile, pool, req.mode)
        refused = self.approval(digest, gate, summary, "@approval", plan=plan, position=0)
        if refused is not None:
            return refused
        return self.execute(plan, digest, 0, gate, summary)

    def resume(self, then: Continuation) -> JsonObject:
        """``go`` from the decision a continuation was written at (``resume_intent``)."""
        call = then.compile_call
        self.opa = then.opa
        self.follow_ups = list(then.follow_ups)
        self.trace.plan_digest = then.trace_plan_digest
        self.trace.entries = list(then.trace)
        self.spent = spent = Spent.from_state(then.spent)
        self.seed = then.seed
        self.repairs = Repairs(self.ports, self.trace, call, spent)
        self.repairs.asked = then.repairs_asked
        self.outputs = dict(then.outputs)
        summary = list(then.summary)
        gate = Gate(call.profile, call.tool_pool, then.mode)
        refused = self.approval(
            then.plan_digest, gate, summary, then.at, plan=then.plan, position=then.position
        )
        if refused is not None:
            return refused
        return self.execute(then.plan, then.plan_digest, then.position, gate, summary)

    def execute(
        self, plan: Plan, digest: str, position: int, gate: Gate, summary: list[JsonValue]
    ) -> JsonObject:
        """5 execute, in order from ``position``, each step re-checked against the policy
        right before it runs; 6 evidence."""
        run_id, ports, outputs = self.run_id, self.ports, self.outputs
        profile, pool, seed = gate.profile, gate.pool, self.seed
        assert self.spent is not None and self.repairs is not None
        spent, repairs = self.spent, self.repairs
        compile_call = repairs.compile_call
        while True:
            if position >= len(plan.steps):
                # An interactive OPA run goes on with its session's next message:
                # a new turn appended to the plan, gated and approved like the first.
                turn = self.next_turn(compile_call, plan, digest, gate, summary)
                if turn is None:
                    break
                if isinstance(turn, dict):
                    return turn
                plan, digest = turn
                continue
            step = plan.steps[position]
            try:
                step_input = resolve_input(step, outputs)
                check_resolved(step, plan, profile, step_input)
                connector = check_step(step, step_input, pool, approved(profile, self.approver))
            except GatehouseError as exc:
                if (stop := self.stopped(step.step_id, summary)) is not None:
                    return stop
                refusal = refusal_outcome(exc)
                ports.record_step_result(step_record(run_id, position, step, refusal, spent))
                summary.append({"step_id": step.step_id, "ok": False, "error_code": exc.code.value})
                return self.end(RunStatus.FAILED, summary, exc.code.value, exc.message)

            if profile.approval.reapprove_outside_data and outside_data(step, plan):
                # The outside value exists now: the approver decides on it, written
                # into a new revision of the plan, before anything is sent.
                reviewed = self.review_outside_data(
                    plan, digest, position, step_input=step_input, gate=gate, summary=summary
                )
                if isinstance(reviewed, dict):
                    return reviewed
                plan, digest = reviewed
                continue  # the step again, its input now the plan's own approved value

            call = step_call(
                run_id,
                position,
                step,
                connector=connector,
                step_input=step_input,
                profile=profile,
                opa=self.opa,
            )
            answered, attempts = settle(ports, self.trace, spent, call, profile=profile, seed=seed)
            if answered.cancelled is not None:  # stopped at the step's boundary, nothing called
                return self.cancelled(answered.cancelled, step.step_id, summary)
            outcome = answered.result
            recorded = outcome.get("recorded")
            final = (
                recorded
                if isinstance(recorded, dict)
                else ports.record_step_result(step_record(run_id, position, step, outcome, spent))
            )
            ok = bool(final.get("ok"))
            code_value = final.get("error_code")
            step_code = code_value if isinstance(code_value, str) else None
            summary.append(
                {"step_id": step.step_id, "ok": ok, "error_code": step_code, "attempts": attempts}
            )
            out = outcome.get("output")
            if ok and isinstance(out, dict):
                outputs[step.step_id] = out
            if (stopped := self.over_budget(summary)) is not None:
                return stopped
            # a step a cancel cut off (an OpenCode turn aborted, reverted and restored,
            # or an in-doubt call not sent again): the run ends here
            cut = step_code == ErrorCode.RUN_CANCELLED.value
            if cut and (stop := self.stopped(cut_at(step.step_id), summary)) is not None:
                return stop
            if not ok and step.on_error is OnError.REPAIR and not is_hard(step_code):
                # A soft failure the planner may mend: the repaired plan keeps the
                # steps done, has a new digest and waits for a new approval.
                revised = self.revise(repairs, plan, digest, position, final=final, gate=gate)
                if isinstance(revised, str):
                    code = step_code or ErrorCode.HANDLER_FAILED.value
                    message = f"{final.get('error_message') or code}; no repair: {revised}"
                    return self.end(RunStatus.FAILED, summary, code, message)
                plan, digest = revised
                label = f"@approval-{repairs.asked + 1}"
                refused = self.approval(digest, gate, summary, label, plan=plan, position=position)
                if refused is not None:
                    return refused
                continue  # the repaired remainder starts where the failed step stood
            # A hard failure (protocol violation, a policy refusal at execution time)
            # ends the run whatever the step's on_error says.
            goes_on = step.on_error in (OnError.CONTINUE, OnError.SOFT) and not is_hard(step_code)
            if not ok and not goes_on:
                message = str(final.get("error_message") or "")
                code = step_code or ErrorCode.HANDLER_FAILED.value
                return self.end(RunStatus.FAILED, summary, code, message)
            position += 1

        # 6 evidence: the summary episode and the terminal status, in one commit
        return self.end(RunStatus.SUCCEEDED, summary)

    def next_turn(
        self,
        compile_call: PlannerCall,
        plan: Plan,
        digest: str,
        gate: Gate,
        summary: list[JsonValue],
    ) -> tuple[Plan, str] | JsonObject | None:
        """The next turn of an interactive OPA run: (the plan with the turn's steps
        appended, its digest), approved; None when the session is over (``end``, or
        no message within the approval timeout); how the run ended otherwise."""
        if self.opa is None or self.opa.execution_mode != "interactive":
            return None
        profile = gate.profile
        turn = len(self.follow_ups) + 1
        message = self.ports.await_message(self.run_id, turn, profile)
        if (stop := self.stopped(f"@input-{turn}", summary)) is not None:
            return stop
        if message is None or message.get("ends") is True:
            return None
        self.follow_ups.append(
            {"turn": turn, "text": message.get("text"), "after_step": len(plan.steps)}
        )
        objective = compile_call.objective + "".join(
            f"\n\n### follow-up {f['turn']}\n{f['text']}" for f in self.follow_ups
        )
        compiled = self.ports.planner_call(
            compile_call.model_copy(
                update={"objective": objective, "call_id": f"@compile-{turn + 1}"}
            )
        )
        self.trace.add(compiled)
        if self.spent is not None:
            self.spent.add_call(compiled, tool=False)
        output = compiled.get("output")
        plan_value = output.get("plan") if isinstance(output, dict) else None
        if not compiled.get("ok") or not isinstance(plan_value, dict):
            code = str(compiled.get("error_code") or ErrorCode.PLANNER_FAILED.value)
            return self.end(RunStatus.FAILED, summary, code, str(compiled.get("error_message")))
        if (stopped := self.over_budget(summary)) is not None:
            return stopped
        ran = [st.step_id for st in plan.steps]
        fresh = fresh_steps(plan_value.get("steps"), set(ran), f"t{turn + 1}-")
        composed = {
            **plan_value,
            "steps": [st.model_dump(mode="json") for st in plan.steps] + fresh,
        }
        revise = _revising(plan, digest, keep=len(plan.steps), ran=ran)
        at = f"@approval-turn-{turn + 1}"
        return self.decide_revision(composed, revise, gate, summary, at, position=len(plan.steps))

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

    def review_outside_data(
        self,
        plan: Plan,
        digest: str,
        position: int,
        *,
        step_input: JsonObject,
        gate: Gate,
        summary: list[JsonValue],
    ) -> tuple[Plan, str] | JsonObject:
        """The plan again with the outside value the step at ``position`` takes written
        into its input, gated, on the plan card as a new revision and decided:
        (plan, digest) when approved, else how the run ended."""
        step = plan.steps[position]
        raw = plan.model_dump(mode="json")
        written = {**step.model_dump(mode="json"), "input": step_input, "input_from": None}
        raw["steps"] = [*raw["steps"][:position], written, *raw["steps"][position + 1 :]]
        ran = [s.step_id for s in plan.steps[:position]]
        revise = _revising(plan, digest, keep=position, ran=ran, outside_data=step.step_id)
        at = f"@approval-data-{step.step_id}"
        return self.decide_revision(raw, revise, gate, summary, at, position=position)

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
        profile, pool, mode = gate
        budgets = None if self.spent is None else self.spent.view_json()
        gated = self.ports.gate_and_card(
            self.run_id, raw, profile, pool, mode, revise=revise, budgets=budgets
        )
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return self.end(RunStatus.FAILED, summary, gated.error_code, gated.error_message)
        self.trace.revision(gated.plan_digest)
        refused = self.approval(
            gated.plan_digest, gate, summary, at, plan=gated.plan, position=position
        )
        return refused if refused is not None else (gated.plan, gated.plan_digest)

    def revise(
        self,
        repairs: Repairs,
        plan: Plan,
        digest: str,
        position: int,
        *,
        final: JsonObject,
        gate: Gate,
    ) -> tuple[Plan, str] | str:
        """A repaired remainder after the step at ``position`` failed, gated and on
        the plan card as a new revision: (plan, digest), or why there is none."""
        step = plan.steps[position]
        raw, _code, why = repairs.remainder(plan, position, step, final)
        if raw is None:
            return why
        ran = [s.step_id for s in plan.steps[: position + 1]]
        revise = _revising(plan, digest, keep=position, ran=ran)
        profile, pool, mode = gate
        gated = self.ports.gate_and_card(
            self.run_id, raw, profile, pool, mode, revise=revise, repaired=True
        )
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return f"the repaired plan was refused: {gated.error_message}"
        self.trace.revision(gated.plan_digest)
        return gated.plan, gated.plan_digest


def _revising(plan: Plan, digest: str, *, keep: int, ran: list[str], **more: str) -> JsonObject:
    """What ``gate_and_card`` holds a new revision of ``plan`` to: its first ``keep``
    steps unchanged, none of the ``ran`` step ids used again (``policies.repair``)."""
    return {
        "previous": plan.model_dump(mode="json"),
        "previous_digest": digest,
        "keep": keep,
        "ran": list[JsonValue](ran),
        **more,
    }
