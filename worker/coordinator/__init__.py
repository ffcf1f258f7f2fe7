"""The coordinator: the loop between an approved plan and its handlers.

What belongs here (the Reach protocol's coordinator role):

* ``envelopes`` — one ``ExecutionEnvelope`` per tool call, built from the plan
  step, the policy's grants and the op_key; deterministic, so a replay
  rebuilds the same envelope and the same digest.
* ``executor`` — the only caller of handlers: delivers an envelope into the
  run's workspace, turns a panic into an ``error`` result (the traceback to
  ``system_log`` only), and holds every result to its schema (anything else
  is a protocol violation, a hard failure).

Which failures are soft or hard, plan repair and the timeout ladder are the
flow's (``worker/flow``).

Handlers know envelopes and results, nothing else: no run state, no
database, no other run's workspace.
"""

from worker.coordinator.envelopes import build_envelope, envelope_id, permissions_of
from worker.coordinator.executor import (
    Delivered,
    check,
    deliver,
    handlers,
    install_handlers,
    refused_result,
)

__all__ = [
    "Delivered",
    "build_envelope",
    "check",
    "deliver",
    "envelope_id",
    "handlers",
    "install_handlers",
    "permissions_of",
    "refused_result",
]
