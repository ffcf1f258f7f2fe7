"""The hand-built tool pool and profile the gate's tests share, and plan builders.

They exercise what the shipped defaults cannot: a connector without limits, a
driver kind the profile does not allow, an https destination with ports and a
path prefix.
"""

from __future__ import annotations

from typing import Any

from contracts import (
    CommandRule,
    Connector,
    Destination,
    DriverKind,
    JsonObject,
    Limits,
    Plan,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies import catalog

__all__ = ["DEFAULT_POOL", "DEFAULT_PROFILE", "LIMITS", "POOL", "PROFILE", "plan", "step"]

DEFAULT_POOL = catalog.tool_pool("default").model
DEFAULT_PROFILE = catalog.profile("default").model

LIMITS = Limits(timeout_s=5, max_output_bytes=4096)
POOL = ToolPool(
    tool_pool_id="test",
    version="1",
    description="hand-built pool for the gate tests",
    connectors=[
        Connector(
            connector_id="memo", driver_kind=DriverKind.NOOP, description="memo", limits=LIMITS
        ),
        Connector(
            connector_id="api",
            driver_kind=DriverKind.HTTP,
            description="one public API",
            limits=LIMITS,
            destinations=[
                Destination(
                    scheme="https", host="api.example.com", ports=[443, 8443], path_prefix="/v1"
                )
            ],
        ),
        Connector(
            connector_id="shell",
            driver_kind=DriverKind.RESTRICTED_SHELL,
            description="ls only",
            limits=LIMITS,
            commands=[CommandRule(name="ls", path="/usr/bin/ls", allowed_flags=["-l"], max_args=3)],
        ),
        Connector(connector_id="unbounded", driver_kind=DriverKind.NOOP, description="no limits"),
        Connector(
            connector_id="agent",
            driver_kind=DriverKind.OPENCODE,
            description="a driver kind the profile does not allow",
            limits=LIMITS,
        ),
    ],
)
PROFILE = PolicyProfile(
    profile_id="test",
    version="1",
    description="hand-built profile for the gate tests",
    max_steps=4,
    allowed_driver_kinds=[DriverKind.NOOP, DriverKind.HTTP, DriverKind.RESTRICTED_SHELL],
    planner_instruction="Propose only.",
)


def step(
    step_id: str,
    connector_id: str,
    driver_kind: DriverKind,
    step_input: JsonObject | None = None,
    input_from: str | None = None,
    pointer: str = "",
) -> PlanStep:
    body: dict[str, Any] = {
        "step_id": step_id,
        "verb": "note",
        "connector_id": connector_id,
        "driver_kind": driver_kind.value,
    }
    if input_from is not None:
        body["input_from"] = {"step_id": input_from, "pointer": pointer}
    else:
        body["input"] = step_input if step_input is not None else {}
    return PlanStep.model_validate(body)


def plan(*steps: PlanStep) -> Plan:
    return Plan(objective="test the gate", steps=list(steps))
