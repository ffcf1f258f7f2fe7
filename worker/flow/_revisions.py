"""New revisions of a run's plan, each gated and put on the plan card again: an
interactive run's next turn, an outside value written into the plan for a person
to decide on, a repaired remainder after a soft failure (``policies.repair`` holds
each to the steps that already ran)."""

from __future__ import annotations

from contracts import ErrorCode, JsonObject, JsonValue, Plan, RunStatus
from worker.flow._gate import gate_plan
from worker.flow._inputs import fresh_steps
from worker.flow._repair import Repairs
from worker.flow._state import Gate, RunState

__all__ = ["next_turn", "review_outside_data", "revise"]


def next_turn(
    run: RunState, plan: Plan, digest: str, *, gate: Gate, summary: list[JsonValue]
) -> tuple[Plan, str] | JsonObject | None:
    """The next turn of an interactive OPA run: (the plan with the turn's steps
    appended, its digest), approved; None when the session is over (``end``, or
    no message within the approval timeout); how the run ended otherwise."""
    if run.opa is None or run.opa.execution_mode != "interactive":
        return None
    assert run.repairs is not None
    compile_call = run.repairs.compile_call  # what the first planner call was asked
    profile = gate.profile
    turn = len(run.follow_ups) + 1
    message = run.ports.await_message(run.run_id, turn, profile)
    if (stop := run.stopped(f"@input-{turn}", summary)) is not None:
        return stop
    if message is None or message.get("ends") is True:
        return None
    run.follow_ups.append(
        {"turn": turn, "text": message.get("text"), "after_step": len(plan.steps)}
    )
    objective = compile_call.objective + "".join(
        f"\n\n### follow-up {f['turn']}\n{f['text']}" for f in run.follow_ups
    )
    compiled = run.ports.planner_call(
        compile_call.model_copy(update={"objective": objective, "call_id": f"@compile-{turn + 1}"})
    )
    run.trace.add(compiled)
    if run.spent is not None:
        run.spent.add_call(compiled, tool=False)
    output = compiled.get("output")
    plan_value = output.get("plan") if isinstance(output, dict) else None
    if not compiled.get("ok") or not isinstance(plan_value, dict):
        code = str(compiled.get("error_code") or ErrorCode.PLANNER_FAILED.value)
        return run.end(RunStatus.FAILED, summary, code, str(compiled.get("error_message")))
    if (stopped := run.over_budget(summary)) is not None:
        return stopped
    ran = [st.step_id for st in plan.steps]
    fresh = fresh_steps(plan_value.get("steps"), set(ran), f"t{turn + 1}-")
    composed = {
        **plan_value,
        "steps": [st.model_dump(mode="json") for st in plan.steps] + fresh,
    }
    revise = _revising(plan, digest, keep=len(plan.steps), ran=ran)
    at = f"@approval-turn-{turn + 1}"
    return run.decide_revision(composed, revise, gate, summary, at, position=len(plan.steps))


def review_outside_data(
    run: RunState,
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
    return run.decide_revision(raw, revise, gate, summary, at, position=position)


def revise(
    run: RunState,
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
    gated = run.ports.gate_and_card(gate_plan(run.run_id, raw, gate, revise=revise, repaired=True))
    if not gated.ok or gated.plan is None or gated.plan_digest is None:
        return f"the repaired plan was refused: {gated.error_message}"
    run.trace.revision(gated.plan_digest)
    return gated.plan, gated.plan_digest


def _revising(plan: Plan, digest: str, *, keep: int, ran: list[str], **more: str) -> JsonObject:
    """What the gate (``worker.flow._gate.gate_plan``) holds a new revision of ``plan``
    to: its first ``keep`` steps unchanged, none of the ``ran`` step ids used again
    (``policies.repair``)."""
    return {
        "previous": plan.model_dump(mode="json"),
        "previous_digest": digest,
        "keep": keep,
        "ran": list[JsonValue](ran),
        **more,
    }
