"""Whether a plan step can change anything: the one answer the approval gate
(``auto_read_only``) and the Cedar gate's ``read_only`` attribute both use."""

from __future__ import annotations

from contracts import Connector, JsonObject, PlanStep
from policies.kinds import rules_of

__all__ = ["step_read_only"]


def step_read_only(
    step: PlanStep, step_input: JsonObject | None, connector: Connector | None = None
) -> bool:
    """True when the step cannot change anything, as far as its input is known: a
    noop; an http GET or HEAD; an MCP tool its connector lists as read-only
    (``KindRules.read_only``). A step whose input is not known (None: it comes from an
    earlier step's result) is not, unless nothing it could be given changes anything."""
    return rules_of(step.driver_kind).read_only(step_input, connector)
