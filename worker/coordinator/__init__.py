"""The coordinator: the loop between an approved plan and its handlers.

What belongs here (the Reach protocol's coordinator role):

* ``envelopes`` — one ``ExecutionEnvelope`` per tool call, built from the plan
  step, the policy's grants and the op_key; deterministic, so a replay
  rebuilds the same envelope and the same digest.
* ``executor`` — the only caller of handlers: delivers an envelope into the
  run's workspace, turns a panic into an ``error`` result (the traceback to
  ``system_log`` only), and holds every result to its schema (anything else
  is a protocol violation, a hard failure).
* ``failures`` — which failures are soft (the step's ``on_error`` decides)
  and which are hard (the run ends).
* ``repair`` — the plan-repair skill: one repair call for a refused compile,
  a repaired remainder after a soft failure with ``on_error: repair``.
* ``ladder`` — the timeout ladder of an OpenCode step (revert, shrink, give up).

Handlers know envelopes and results, nothing else: no run state, no
database, no other run's workspace.
"""
