"""What the flow asks its call ports for: a planner call, one attempt of a tool call.

``worker.flow`` builds a ``PlannerCall`` for a run's compile (and each repair or
next turn) and a ``ToolCall`` for each step (``step_call``) and each attempt of it
(``settle``); the live worker turns either into the call's request and sends it
through the op_key ledger (``worker.calls``), a replay builds the same request and
reads the ledger. Models from the flow to the callee: no JSON between.
"""

from __future__ import annotations

from typing import Literal

from contracts._base import Closed
from contracts._json import JsonObject
from contracts.execution import TurnAllowance
from contracts.opa_run import OpaJob
from contracts.plan import DriverKind
from contracts.tool_pool import Connector, OpencodePolicy, PolicyProfile, ToolPool

__all__ = ["COMPILE_STEP_ID", "PlannerCall", "StepRecordSpec", "ToolCall"]

# The ledger step id of the planner call. Plan step ids start with a letter,
# so this can never collide with one.
COMPILE_STEP_ID = "@compile"


class PlannerCall(Closed):
    run_id: str
    recipe_id: str
    objective: str
    parameters: JsonObject
    profile: PolicyProfile
    tool_pool: ToolPool
    seed: int | None = None  # drawn from the run's seed; sent to model planners
    # A repair call (see policies/repair.py): its ledger step id, and what the
    # planner is told; None for the first compile.
    call_id: str = COMPILE_STEP_ID
    repair: JsonObject | None = None


class StepRecordSpec(Closed):
    """What the record of a step needs besides its call's result."""

    connector_id: str
    output_schema_ref: str | None = None
    # the run's budget account before this call (``Spent.state_json``): set by the
    # attempt that makes the call, empty until then
    spent: JsonObject = {}


class ToolCall(Closed):
    run_id: str
    step_id: str
    position: int = 0  # the step's place in the plan (0-based)
    attempt: int = 1
    driver_kind: DriverKind
    connector: Connector
    input: JsonObject
    # opencode steps only: the profile's executor policy, and whether this is the
    # timeout ladder's narrowed re-prompt.
    executor_policy: OpencodePolicy | None = None
    narrowed: bool = False
    allowance: TurnAllowance | None = None  # what is left of the run's budgets
    opa: OpaJob | None = None  # the run came from an OPA archive
    unsandboxed_shell: Literal["allowed"] | None = None  # the profile allows it in so many words
    unsandboxed_opencode: Literal["allowed"] | None = None  # likewise, for opencode steps
    # The step boundary checked for a cancel before the call is claimed (its first
    # attempt only), and what the step's record needs when the call settles it.
    boundary: str | None = None
    record: StepRecordSpec | None = None
