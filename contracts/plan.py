"""The plan envelope ``env.mova_agent_plan_v1``: what a planner may propose.

Declarative only: ordered steps, each naming a connector from the tool pool.
There are no loops, conditions, expressions or code fields, and the model is
closed, so a planner cannot smuggle one in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)

from contracts._base import Closed, Identifier, ShortText
from contracts._json import JsonObject

__all__ = [
    "KIND_SHAPES",
    "DriverKind",
    "InputFrom",
    "KindShape",
    "OnError",
    "Plan",
    "PlanStep",
    "Verb",
    "kinds_that",
]

PLAN_SCHEMA_ID: Final = "env.mova_agent_plan_v1"


class DriverKind(StrEnum):
    NOOP = "noop"
    HTTP = "http"
    RESTRICTED_SHELL = "restricted_shell"
    OPENCODE = "opencode"
    MCP_PROXY = "mcp_proxy"


@dataclass(frozen=True)
class KindShape:
    """What a connector of a kind may declare (``contracts.tool_pool.Connector``) and
    where a pool lets outside data go by default. The rest of what a kind is lives in
    ``policies/kinds`` and ``worker/handlers``."""

    destinations: bool = False  # it takes destinations
    commands: bool = False  # it takes command rules
    mcp: bool = False  # it takes an MCP server (and only such a kind does)
    chooses_idempotency: bool = False  # it may say its callee takes no key
    default_data: tuple[str, ...] = ()  # a pool's ``tainted_data`` unless it says otherwise


KIND_SHAPES: Final[dict[DriverKind, KindShape]] = {
    DriverKind.NOOP: KindShape(default_data=("",)),
    DriverKind.HTTP: KindShape(
        destinations=True, chooses_idempotency=True, default_data=("/json",)
    ),
    DriverKind.RESTRICTED_SHELL: KindShape(commands=True),
    DriverKind.OPENCODE: KindShape(),
    DriverKind.MCP_PROXY: KindShape(destinations=True, mcp=True),
}


def kinds_that(fact: str) -> str:
    """The kinds whose ``KindShape`` has ``fact``, as words: ``http and mcp_proxy``."""
    return " and ".join(k.value for k, shape in KIND_SHAPES.items() if getattr(shape, fact))


class Verb(StrEnum):
    """The kind of operation a step performs (not how it is implemented)."""

    NOTE = "note"
    READ = "read"
    FETCH = "fetch"
    WRITE = "write"
    RUN = "run"
    EDIT = "edit"


class OnError(StrEnum):
    """What a soft failure of the step does to the run (hard failures always end it)."""

    FATAL = "fatal"  # the run fails
    CONTINUE = "continue"  # the run goes on without the step's output
    SOFT = "soft"  # the first name of "continue"; plans written with it keep working
    # The planner is asked for a repaired remainder of the plan, which needs a new
    # approval (model planners only; otherwise the failure is fatal).
    REPAIR = "repair"


StepId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
# A JSON Pointer (RFC 6901) into the earlier step's output; "" is the whole output.
Pointer = Annotated[str, StringConstraints(pattern=r"^(/[^\x00]*)?$", max_length=512)]


# Where in the step's own input the earlier output goes: an existing object's new
# key (``/json``, ``/json/name``) or the end of an existing list (``/argv/-``).
Into = Annotated[str, StringConstraints(pattern=r"^(/[^\x00]*)+$", max_length=512)]


class InputFrom(Closed):
    """A value from an earlier step's output: outside data (tainted), never approved
    as such. Without ``into`` it is the step's whole input; with ``into`` it fills
    one position of the step's fixed ``input``, which the approver sees."""

    step_id: StepId
    pointer: Pointer = ""
    into: Into | None = None

    @model_serializer(mode="wrap")
    def _omit_unset_into(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Plans written before ``into`` existed keep their digests.
        data = handler(self)
        if isinstance(data, dict) and data.get("into") is None:
            data.pop("into", None)
        return data


class PlanStep(Closed):
    step_id: StepId
    verb: Verb
    connector_id: Identifier
    driver_kind: DriverKind
    title: ShortText | None = None
    input: JsonObject | None = None
    input_from: InputFrom | None = None
    output_schema_ref: Identifier | None = None
    on_error: OnError = OnError.FATAL

    @model_validator(mode="after")
    def _one_input_source(self) -> PlanStep:
        if self.input_from is not None and self.input_from.into is not None:
            if self.input is None:
                raise ValueError("input_from.into names a position in input, which is missing")
        elif (self.input is None) == (self.input_from is None):
            raise ValueError("a step takes exactly one of input or input_from")
        return self


class Plan(Closed):
    schema_id: Literal["env.mova_agent_plan_v1"] = PLAN_SCHEMA_ID
    objective: ShortText
    steps: list[PlanStep] = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _ordered_references(self) -> Plan:
        seen: set[str] = set()
        for step in self.steps:
            if step.step_id in seen:
                raise ValueError(f"step_id {step.step_id!r} appears twice")
            if step.input_from is not None and step.input_from.step_id not in seen:
                raise ValueError(
                    f"step {step.step_id!r} takes input_from {step.input_from.step_id!r},"
                    " which is not an earlier step"
                )
            seen.add(step.step_id)
        return self
