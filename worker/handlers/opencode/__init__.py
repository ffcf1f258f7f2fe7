"""The ``opencode`` handler, and OpenCode as Gatehouse's executor engine.

``run`` and ``reconcile_turn`` (``_handler``) are the handler the registry
delivers to. The engine under it, also used by the OpenCode planner
(``worker.planners``): ``supervisor`` (one sandboxed ``opencode serve`` per
worker), ``client`` (its HTTP API), ``turn`` and ``watch`` (one turn: prompt,
stream, stall detection, revert), ``runner`` (a turn's spec from an envelope
or a compile), ``workspace`` (digests and restores), ``spend`` (a turn's
budget), ``events``, ``config``, ``pin`` (the pinned build) and ``ban`` (no
child sessions).
"""

from worker.handlers.opencode._handler import OpencodeInput, reconcile_turn, run

__all__ = ["OpencodeInput", "reconcile_turn", "run"]
