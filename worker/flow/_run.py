"""The intent flow: compile → gate → plan card → wait → execute → evidence.

Orchestration only, written once and run through four kinds of ``Ports``:

* live, as the DBOS workflow (``worker.durable``'s ``LivePorts``): every port is a
  ledgered call, a record of ours, a message wait or a durable sleep;
* a split run's later stretch (``StretchPorts``), which starts at the decision it
  parked at, from the continuation its park wrote (``resume_intent``);
* in a replay (``worker.replay``): every call is served from the ledger by
  op_key and nothing is written or sent;
* in the flow's own tests, through a fake (``tests/support/fake_ports.py``).

No clock, randomness, network or file access here: every such thing is a
port, and random choices are drawn from the run's recorded seed, so a
recovered workflow and a replay take exactly the same path.
"""

from __future__ import annotations

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
    RunStatus,
)
from policies.cedar_gate import approved
from policies.gate import check_step
from policies.taint import check_resolved, outside_data
from worker.flow._budgets import Spent
from worker.flow._failures import is_hard
from worker.flow._gate import gate_plan
from worker.flow._inputs import resolve_input
from worker.flow._ports import Ports
from worker.flow._repair import Repairs
from worker.flow._revisions import next_turn, review_outside_data, revise
from worker.flow._seed import planner_seed
from worker.flow._settle import cut_at, settle
from worker.flow._state import At, Gate, RunState
from worker.flow._step import refusal_outcome, step_call, step_record

__all__ = ["resume_intent", "run_intent"]


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


class _Run(RunState):
    """The phases of a run, each a method that returns what comes next or how the run
    ended: ``go`` begins it, ``compile`` proposes the plan, ``card`` gates it, puts it
    on the card and waits for the first decision; ``resume`` goes on from a parked
    decision; then ``execute``: each step ``run_step``, its outcome ``after_step``."""

    def go(self, job: IntentJob) -> JsonObject:
        """The whole run: begun, compiled, gated and carded, decided, executed."""
        req, run_id, ports = job.request, self.run_id, self.ports
        self.opa = job.opa
        begun = ports.begin(run_id, req.policy_profile, req.tool_pool)
        if not begun.ok or begun.profile is None or begun.tool_pool is None:
            return self.end(RunStatus.FAILED, [], begun.error_code, begun.error_message)
        profile, pool = begun.profile, begun.tool_pool
        try:  # the shim refused a widening intent already; this holds for any caller
            limits = profile.budgets.narrowed(req.budgets)
        except GatehouseError as exc:
            return self.end(RunStatus.FAILED, [], exc.code.value, exc.message)
        self.spent = Spent(limits, profile.prices)
        self.seed = begun.seed or ""
        if (stop := self.stopped("@compile", [])) is not None:
            return stop
        gate = Gate(profile, pool, req.mode)
        compiled = self.compile(job, gate)
        if isinstance(compiled, dict):
            return compiled
        return self.card(compiled, gate)

    def compile(self, job: IntentJob, gate: Gate) -> tuple[JsonObject, bool] | JsonObject:
        """1 compile: the plan a run-plan supplied, or the planner's through the ledger
        (with its one repair call when the gate would refuse it): (the raw plan, whether
        a repair made it), or how the run ended."""
        req, run_id, ports = job.request, self.run_id, self.ports
        assert self.spent is not None
        profile, pool, _mode = gate
        compile_call = PlannerCall(
            run_id=run_id,
            recipe_id=req.recipe,
            objective=req.objective,
            parameters=req.parameters,
            profile=profile,
            tool_pool=pool,
            seed=planner_seed(self.seed, run_id),
        )
        self.repairs = repairs = Repairs(ports, self.trace, compile_call, self.spent)
        if req.plan is not None:
            return req.plan.model_dump(mode="json"), False
        compiled = ports.planner_call(compile_call)
        self.trace.add(compiled)
        self.spent.add_call(compiled, tool=False)
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
        return raw_plan, repaired

    def card(self, compiled: tuple[JsonObject, bool], gate: Gate) -> JsonObject:
        """2 gate + 3 plan card, then 4 the first decision and the steps (``execute``)."""
        assert self.spent is not None
        raw_plan, repaired = compiled
        decided = gate_plan(
            self.run_id, raw_plan, gate, repaired=repaired, budgets=self.spent.view_json()
        )
        gated = self.ports.gate_and_card(decided)
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return self.end(RunStatus.FAILED, [], gated.error_code, gated.error_message)
        plan, digest = gated.plan, gated.plan_digest
        self.trace.plan_digest = digest
        if gate.mode is Mode.PLAN_ONLY:
            return self.stopped("@approval", []) or self.end(RunStatus.PLANNED, [])
        # 4 durable wait: the plan_approvals row decides; a message only wakes us early
        summary: list[JsonValue] = []
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
        right before it runs (``run_step``); 6 evidence."""
        at = At(plan, digest, position)
        while True:
            if at.position >= len(at.plan.steps):
                # An interactive OPA run goes on with its session's next message:
                # a new turn appended to the plan, gated and approved like the first.
                turn = next_turn(self, at.plan, at.digest, gate=gate, summary=summary)
                if turn is None:
                    break
                if isinstance(turn, dict):
                    return turn
                at = At(*turn, at.position)
                continue
            went = self.run_step(at, gate, summary)
            if isinstance(went, dict):
                return went
            at = went
        # 6 evidence: the summary episode and the terminal status, in one commit
        return self.end(RunStatus.SUCCEEDED, summary)

    def run_step(self, at: At, gate: Gate, summary: list[JsonValue]) -> JsonObject | At:
        """The step at ``at``: checked with its input resolved, decided on again when it
        takes outside data and the profile asks, called until its outcome is known; then
        where the run goes on (``after_step``), or how it ended."""
        run_id, ports, profile = self.run_id, self.ports, gate.profile
        assert self.spent is not None
        plan, position = at.plan, at.position
        step = plan.steps[position]
        try:
            step_input = resolve_input(step, self.outputs)
            check_resolved(step, plan, profile, step_input)
            connector = check_step(step, step_input, gate.pool, approved(profile, self.approver))
        except GatehouseError as exc:
            if (stop := self.stopped(step.step_id, summary)) is not None:
                return stop
            refusal = refusal_outcome(exc)
            ports.record_step_result(step_record(run_id, position, step, refusal, self.spent))
            summary.append({"step_id": step.step_id, "ok": False, "error_code": exc.code.value})
            return self.end(RunStatus.FAILED, summary, exc.code.value, exc.message)

        if profile.approval.reapprove_outside_data and outside_data(step, plan):
            # The outside value exists now: the approver decides on it, written
            # into a new revision of the plan, before anything is sent.
            reviewed = review_outside_data(
                self, plan, at.digest, position, step_input=step_input, gate=gate, summary=summary
            )
            if isinstance(reviewed, dict):
                return reviewed
            return At(*reviewed, position)  # the step again, its input now the plan's own

        call = step_call(
            run_id,
            position,
            step,
            connector=connector,
            step_input=step_input,
            profile=profile,
            opa=self.opa,
        )
        answered, attempts = settle(
            ports, self.trace, self.spent, call, profile=profile, seed=self.seed
        )
        if answered.cancelled is not None:  # stopped at the step's boundary, nothing called
            return self.cancelled(answered.cancelled, step.step_id, summary)
        return self.after_step(at, answered.result, attempts, gate, summary)

    def after_step(
        self, at: At, outcome: JsonObject, attempts: int, gate: Gate, summary: list[JsonValue]
    ) -> JsonObject | At:
        """The step's outcome recorded, and where the run goes on: the next step, a
        repaired remainder once approved, or its end (a budget crossed, a cancel that
        cut the step off, a failure the step's ``on_error`` does not pass)."""
        assert self.spent is not None and self.repairs is not None
        plan, digest, position = at
        step = plan.steps[position]
        recorded = outcome.get("recorded")
        final = (
            recorded
            if isinstance(recorded, dict)
            else self.ports.record_step_result(
                step_record(self.run_id, position, step, outcome, self.spent)
            )
        )
        ok = bool(final.get("ok"))
        code_value = final.get("error_code")
        step_code = code_value if isinstance(code_value, str) else None
        summary.append(
            {"step_id": step.step_id, "ok": ok, "error_code": step_code, "attempts": attempts}
        )
        out = outcome.get("output")
        if ok and isinstance(out, dict):
            self.outputs[step.step_id] = out
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
            repairs = self.repairs
            revised = revise(self, repairs, plan, digest, position, final=final, gate=gate)
            if isinstance(revised, str):
                code = step_code or ErrorCode.HANDLER_FAILED.value
                message = f"{final.get('error_message') or code}; no repair: {revised}"
                return self.end(RunStatus.FAILED, summary, code, message)
            plan, digest = revised
            label = f"@approval-{repairs.asked + 1}"
            refused = self.approval(digest, gate, summary, label, plan=plan, position=position)
            if refused is not None:
                return refused
            return At(plan, digest, position)  # the repaired remainder starts here
        # A hard failure (protocol violation, a policy refusal at execution time)
        # ends the run whatever the step's on_error says.
        goes_on = step.on_error in (OnError.CONTINUE, OnError.SOFT) and not is_hard(step_code)
        if not ok and not goes_on:
            message = str(final.get("error_message") or "")
            code = step_code or ErrorCode.HANDLER_FAILED.value
            return self.end(RunStatus.FAILED, summary, code, message)
        return At(plan, digest, position + 1)
