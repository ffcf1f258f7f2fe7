"""Named crash points, for tests that kill a worker at an exact moment.

``GATEHOUSE_CRASH_POINT=<point>:<step_id>`` makes the worker process exit at
once (``os._exit``, like ``kill -9``: no cleanup, no checkpoint) when the
call for that step reaches the point. Unset, this does nothing.
"""

from __future__ import annotations

import os
import sys

__all__ = ["POINTS", "maybe_crash"]

POINTS = ("after_claim", "after_effect", "after_completion")


def maybe_crash(setting: str | None, point: str, step_id: str) -> None:
    if setting is None or setting != f"{point}:{step_id}":
        return
    sys.stderr.write(f"gatehouse: crash point {point} reached for step {step_id}\n")
    sys.stderr.flush()
    os._exit(137)
