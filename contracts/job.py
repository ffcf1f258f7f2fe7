"""The typed inputs of the run workflows (``env.intent_job_v1``, ``env.stretch_job_v1``)
and where a parked run goes on (``env.continuation_v1``).

Queued work outlives code changes, so each workflow takes a single JSON object
rather than positional arguments; new optional fields keep old jobs readable.
"""

from __future__ import annotations

from typing import Literal

from contracts._base import Closed
from contracts._json import JsonObject, JsonValue
from contracts.calls import PlannerCall
from contracts.intent import IntentRequest, Mode
from contracts.opa_run import OpaJob
from contracts.plan import Plan

__all__ = ["Continuation", "IntentJob", "StretchJob"]

# Recovery resumes a workflow only under the version it started with, and the
# shim enqueues under this one; bump it when a change to the workflow code
# would replay old runs differently.
# gatehouse-7: a stretch after a decision starts from its run's continuation
# (``StretchJob.continuation``), which gatehouse-6's workers cannot read.
APP_VERSION = "gatehouse-7"


class IntentJob(Closed):
    schema_id: Literal["env.intent_job_v1"] = "env.intent_job_v1"
    run_id: str
    intent_id: str
    request: IntentRequest
    opa: OpaJob | None = None  # the run was submitted as an OPA archive
    # The run is split at every human decision (a stretch per decision). A job
    # enqueued before stretches existed lacks it: that run waits in place.
    stretched: bool = False
    # A fork (``gatehouse runs fork``): its parent's calls before this plan step
    # (1-based) are answered from the parent's ledger.
    fork_from_step: int | None = None


class StretchJob(Closed):
    """The input of a run's stretch after a decision (``gatehouse.stretch``)."""

    schema_id: Literal["env.stretch_job_v1"] = "env.stretch_job_v1"
    run_id: str
    stretch: int
    resume_wait: int  # the flow's wait the run was parked at (0: its first)
    until: str | None = None  # that wait's expiry, ISO 8601
    # Where the run goes on (``Continuation``), written with its park at a decision:
    # the stretch starts at that decision. None: parked at another kind of wait, or
    # before gatehouse-7; the stretch runs the flow from its start, answered from
    # the ledger up to the wait.
    continuation: JsonObject | None = None
    # The decision the hand-off took at that wait, its records written in the hand-off's
    # own transaction ({plan_digest, decision, decided_by}; with a continuation only):
    # the stretch goes on from it at once. None: the stretch takes the decision itself.
    decided: JsonObject | None = None


class Continuation(Closed):
    """What a split run's next stretch needs to start right at the decision the run
    parked at, written with the park (``runs.continuation_json``): the decision's
    boundary and the plan it is on, the step the run goes on at, and everything the
    flow had counted so far. The flow's own state, so a later release reads a
    record an earlier one wrote: fields are only ever added, with defaults."""

    schema_id: Literal["env.continuation_v1"] = "env.continuation_v1"
    at: str  # the decision's boundary ('@approval', '@approval-2', ...)
    plan: Plan  # the plan decided on
    plan_digest: str
    position: int  # the step it goes on at, once approved (0-based)
    outputs: dict[str, JsonObject]  # the outputs of the steps that ran, by step id
    summary: list[JsonValue]  # the steps' summary so far
    trace_plan_digest: str | None  # the trace so far (``worker.flow.Trace``)
    trace: list[JsonValue]
    spent: JsonObject  # the budget account (``Spent.state_json``)
    compile_call: PlannerCall  # what the run's first planner call was asked
    mode: Mode
    seed: str  # the run's recorded seed
    repairs_asked: int = 0  # repaired remainders asked for so far
    follow_ups: list[JsonObject] = []  # an interactive OPA run's messages so far
    opa: OpaJob | None = None
    fork_from_step: int | None = None  # a fork's fork point (its parent's calls before it)
