"""The worker process: its settings, its shared state, and what keeps it healthy.

* ``_settings`` — ``WorkerSettings``, every ``GATEHOUSE_*`` variable a worker reads;
* ``_state`` — the ``Runtime`` a worker installs once at start (settings, database);
* ``_crash`` — named crash points, for tests that kill a worker at an exact moment;
* ``_storage`` — waiting out a full disk in place, and the runs it stranded;
* ``_tracing`` — Gatehouse's attributes on the OpenTelemetry spans DBOS opens;
* ``_liveness`` — judging another process dead without comparing wall clocks;
* ``_reaper`` — heartbeats, and the reaper that hands a dead worker's runs over.

No workflow code here: what the reaper has DBOS do it is given (``Upkeep``).
"""

from worker.runtime._crash import CALL_POINTS, POINTS, RUN, RUN_POINTS, TURN_POINTS, maybe_crash
from worker.runtime._liveness import Silence
from worker.runtime._reaper import LEASE, Pass, Reaper, Upkeep, beating, heartbeat, say_stopped
from worker.runtime._settings import (
    DEFAULT_OPENCODE_DIR,
    WorkerSettings,
    anchor_file,
    default_share,
    evidence_key,
    notifications,
    notifications_file,
    opencode_dir,
)
from worker.runtime._state import Runtime, install, runtime
from worker.runtime._storage import resumed, stranded, stranded_now, wait_for_space
from worker.runtime._tracing import annotate, call_span, set_tracing, step_span

__all__ = [
    "CALL_POINTS",
    "DEFAULT_OPENCODE_DIR",
    "LEASE",
    "POINTS",
    "RUN",
    "RUN_POINTS",
    "TURN_POINTS",
    "Pass",
    "Reaper",
    "Runtime",
    "Silence",
    "Upkeep",
    "WorkerSettings",
    "anchor_file",
    "annotate",
    "beating",
    "call_span",
    "default_share",
    "evidence_key",
    "heartbeat",
    "install",
    "maybe_crash",
    "notifications",
    "notifications_file",
    "opencode_dir",
    "resumed",
    "runtime",
    "say_stopped",
    "set_tracing",
    "step_span",
    "stranded",
    "stranded_now",
    "wait_for_space",
]
