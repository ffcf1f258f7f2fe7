"""Provider and tool calls through the op_key ledger: built, sent once, recorded.

* ``_ledger`` — ``through_ledger``: one call exactly once per op_key (claim,
  perform, complete; a row found finished is served; an interrupted one is
  re-sent, reconciled or reported in doubt);
* ``_planner`` — a planner call (compile or repair), ready for the ledger;
* ``_tool`` — one attempt of a plan step's tool call, ready for the ledger.

No DBOS here: the live worker runs each call in its workflow's body, the
ledger its only checkpoint (``worker.durable``); a replay builds the same
requests and reads the ledger.
"""

from worker.calls._ledger import (
    Call,
    Performed,
    Prepared,
    performed,
    refusal,
    settled,
    through_ledger,
)
from worker.calls._planner import COMPILE_STEP_ID, PlannerCall, prepare_planner
from worker.calls._tool import (
    StepRecordSpec,
    ToolCall,
    outcome_of,
    performed_of,
    prepare_tool,
    settles_step,
)

__all__ = [
    "COMPILE_STEP_ID",
    "Call",
    "Performed",
    "PlannerCall",
    "Prepared",
    "StepRecordSpec",
    "ToolCall",
    "outcome_of",
    "performed",
    "performed_of",
    "prepare_planner",
    "prepare_tool",
    "refusal",
    "settled",
    "settles_step",
    "through_ledger",
]
