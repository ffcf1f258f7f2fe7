"""Whether a plan step can change anything: the one answer the approval gate
(``auto_read_only``) and the Cedar gate's ``read_only`` attribute both use."""

from __future__ import annotations

from contracts import Connector, DriverKind, JsonObject, PlanStep

__all__ = ["step_read_only"]


def step_read_only(
    step: PlanStep, step_input: JsonObject | None, connector: Connector | None = None
) -> bool:
    """True when the step cannot change anything, as far as its input is known: a
    noop; an http GET or HEAD; an MCP tool its connector lists as read-only. A step
    whose input is not known (None: it comes from an earlier step's result) is not."""
    if step.driver_kind is DriverKind.NOOP:
        return True
    if step_input is None:
        return False
    if step.driver_kind is DriverKind.HTTP:
        method = step_input.get("method", "GET")
        return isinstance(method, str) and method.upper() in {"GET", "HEAD"}
    if (
        step.driver_kind is DriverKind.MCP_PROXY
        and connector is not None
        and connector.mcp is not None
    ):
        return step_input.get("tool") in connector.mcp.read_only_tools
    return False
