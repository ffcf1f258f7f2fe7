"""One plan step's tool call, attempt after attempt, until its outcome is known.

Part of the flow (``worker.flow._run``), run live and in a replay alike: a retry
after a call that surely did not act (seeded backoff), the timeout ladder of a
stalled OpenCode turn, an interrupted call a person must settle. No clock,
randomness or I/O of its own: every such thing is a port.
"""

from __future__ import annotations

from contracts import ErrorCode, JsonObject, PolicyProfile, ToolCall
from policies.kinds import rules_of
from worker.flow._budgets import Spent
from worker.flow._ladder import Ladder, applied, not_resent
from worker.flow._ports import CallOutcome, Ports, Trace
from worker.flow._seed import draw

__all__ = ["cut_at", "settle"]


def _over(message: str) -> JsonObject:
    """A step whose next call was not made: it would have crossed a budget."""
    return {
        "ok": False,
        "op_key": None,
        "output": {},
        "error_code": ErrorCode.BUDGET_EXCEEDED.value,
        "error_message": message,
        "artifacts": [],
    }


def cut_at(step_id: str) -> str:
    """The boundary of a cancel that cut a step off mid-way."""
    return f"{step_id}#cut"


def settle(
    ports: Ports,
    trace: Trace,
    spent: Spent,
    call: ToolCall,
    *,
    profile: PolicyProfile,
    seed: str,
) -> tuple[CallOutcome, int]:
    """One step's tool call, attempt after attempt until its outcome is known:
    (outcome, attempts). An opencode turn that stalls climbs the timeout ladder.
    A cancel seen at the step's boundary is the outcome's ``cancelled``, nothing called."""
    run_id, step_id = call.run_id, call.step_id
    attempt = 1
    ladder = Ladder(profile)
    turn = rules_of(call.driver_kind).agent_turn
    while True:
        exceeded = spent.before(tool=True, model_turn=turn)
        if exceeded is not None:  # the call is not made: it would cross a budget
            return CallOutcome(ladder.attach(_over(exceeded.message))), attempt
        sent = call.model_copy(
            update={
                "attempt": attempt,
                # only the first attempt checks the boundary
                "boundary": call.boundary if attempt == 1 else None,
                # the record needs the account before this call
                "record": None
                if call.record is None
                else call.record.model_copy(update={"spent": spent.state_json()}),
                # the turn stops itself at what is left
                "allowance": spent.allowance() if turn else call.allowance,
            }
        )
        answered = ports.tool_call(sent)
        if answered.cancelled is not None:
            return answered, attempt
        outcome = answered.result
        trace.add(outcome)
        spent.add_call(outcome, tool=True)
        if spent.crossed() is not None:  # spent past a budget: the run ends next
            return CallOutcome(ladder.attach(outcome)), attempt
        code = outcome.get("error_code")
        if code == ErrorCode.OC_STALLED.value:
            # Rung 1 happened inside the turn (aborted, reverted, digest checked).
            if not ladder.climb(outcome, narrowed=call.narrowed):
                return CallOutcome(ladder.give_up(outcome)), attempt
            call = call.model_copy(update={"narrowed": True})  # rung 2: once, narrowed
        elif code == ErrorCode.TURN_INTERRUPTED.value and attempt < profile.max_attempts:
            ladder.note(outcome)  # undone after a crash: sent again, new op_key
        elif code == ErrorCode.CALL_IN_DOUBT.value:
            # Never guess: a person says whether the interrupted call took effect.
            op_key = str(outcome.get("op_key") or "")
            resolved = ports.await_resolution(run_id, op_key, step_id)
            trace.resolution(op_key, resolved)
            if resolved == "applied":
                return CallOutcome(applied(op_key)), attempt
            if ports.cancelled(run_id, cut_at(step_id)) is not None:
                return CallOutcome(not_resent(op_key)), attempt  # cancelled meanwhile
        elif code != ErrorCode.UPSTREAM_UNAVAILABLE.value or attempt >= profile.max_attempts:
            return CallOutcome(ladder.attach(outcome)), attempt
        else:  # certainly not applied: back off, then a new attempt
            jitter = draw(seed, "backoff", run_id, step_id, str(attempt))
            backoff = profile.retry_backoff_s * 2 ** (attempt - 1) * (0.5 + jitter)
            spent.add_pause(backoff)
            ports.pause(backoff)
        attempt += 1  # (in doubt and not applied: send it again, as a new attempt)
