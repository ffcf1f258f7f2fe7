"""The intent flow: compile → gate → plan card → decision → execute → evidence.

Pure orchestration, written once and run through ``Ports``: live
(``worker.durable``: every port a ledgered call, a record, a durable wait or
sleep; a later stretch of a split run from its decision, ``resume_intent``),
in a replay (``worker.replay``: every call served from the ledger), and in the
tests' fakes. This package imports only ``contracts``, ``policies`` and
itself: no DBOS, no ledger, no runtime, no clock, randomness, network or
files. Random choices are drawn from the run's recorded seed, so a recovered
workflow and a replay take exactly the same path.

* ``_run`` — the phases of one run: compile, gate and card, the decision, then each
  step (``run_step``) and where its outcome leads (``after_step``);
* ``_state`` — what a run holds between phases, and the moves they share: how it
  ends, a cancel at a boundary, a budget crossed, the wait for a decision;
* ``_revisions`` — a new revision of the plan gated and decided again: the next
  turn, an outside value written in, a repaired remainder;
* ``_settle`` — one step's call, attempt after attempt (retries, the timeout
  ladder, calls in doubt);
* ``_gate`` — the gate's decision on a proposed plan, made once, for a port to write;
* ``_step`` — what one step hands the ports: its call, its record, a refusal;
* ``_inputs`` — ``input_from``: an earlier step's output as a later input;
* ``_repair`` — the plan-repair skill; ``_ladder`` — the OpenCode timeout
  ladder; ``_failures`` — soft and hard failures; ``_budgets`` — what a run
  has spent; ``_seed`` — seeded choices;
* ``_ports`` — the ports and the trace; ``_results`` — what they exchange.
"""

from worker.flow._budgets import MODEL_TARGETS, Exceeded, Ledgered, Spent, usage_of
from worker.flow._failures import HARD_FAILURES, is_hard
from worker.flow._gate import gate_plan
from worker.flow._inputs import fresh_steps, resolve_input
from worker.flow._ladder import Ladder, applied, not_resent
from worker.flow._ports import CallOutcome, Ports, Trace
from worker.flow._repair import COMPILE_REPAIR_ID, MAX_STEP_REPAIRS, MODEL_PLANNERS, Repairs
from worker.flow._results import BeginResult, GateResult, Parked, PlanGated, RunEnd, StepRecord
from worker.flow._run import resume_intent, run_intent
from worker.flow._seed import draw, fresh_seed, planner_seed
from worker.flow._settle import cut_at, settle
from worker.flow._step import refusal_outcome, step_call, step_record

__all__ = [
    "COMPILE_REPAIR_ID",
    "HARD_FAILURES",
    "MAX_STEP_REPAIRS",
    "MODEL_PLANNERS",
    "MODEL_TARGETS",
    "BeginResult",
    "CallOutcome",
    "Exceeded",
    "GateResult",
    "Ladder",
    "Ledgered",
    "Parked",
    "PlanGated",
    "Ports",
    "Repairs",
    "RunEnd",
    "Spent",
    "StepRecord",
    "Trace",
    "applied",
    "cut_at",
    "draw",
    "fresh_seed",
    "fresh_steps",
    "gate_plan",
    "is_hard",
    "not_resent",
    "planner_seed",
    "refusal_outcome",
    "resolve_input",
    "resume_intent",
    "run_intent",
    "settle",
    "step_call",
    "step_record",
    "usage_of",
]
