"""Named crash points, for tests that kill a worker at an exact moment.

``GATEHOUSE_CRASH_POINT=<point>:<step_id>`` makes the worker process exit at
once (``os._exit``, like ``kill -9``: no cleanup, no checkpoint) when the
call for that step reaches the point. Unset, this does nothing.

Call points (step_id is a plan step id, or ``@compile`` for the planner):
``before_claim``, ``after_claim``, ``after_effect`` and ``after_completion``
(the ledger row is complete but the DBOS step checkpoint is not written).
Turn point (an opencode step): ``mid_turn``, once the turn's first tool call
has finished inside OpenCode (the model has the prompt; the turn is not over).
Run points (step_id ``@run``): ``approval_wait`` (inside the durable wait
for a decision) and ``after_approval`` (the decision is recorded, no step
has run yet).
"""

from __future__ import annotations

import os
import sys

__all__ = ["CALL_POINTS", "POINTS", "RUN", "RUN_POINTS", "TURN_POINTS", "maybe_crash"]

CALL_POINTS = ("before_claim", "after_claim", "after_effect", "after_completion")
TURN_POINTS = ("mid_turn",)
RUN_POINTS = ("approval_wait", "after_approval")
POINTS = CALL_POINTS + TURN_POINTS + RUN_POINTS
RUN = "@run"


def maybe_crash(setting: str | None, point: str, step_id: str) -> None:
    if setting is None or setting != f"{point}:{step_id}":
        return
    sys.stderr.write(f"gatehouse: crash point {point} reached for step {step_id}\n")
    sys.stderr.flush()
    os._exit(137)
