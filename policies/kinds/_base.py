"""What a driver kind says about itself: the defaults every kind starts from.

Each kind is one module beside this one (``policies/kinds/<kind>.py``) holding one
subclass of ``KindRules`` that overrides what differs: the input the gate refuses,
the positions an outside value may never fill, its Cedar attributes, its sentence
and request on the plan card, whether it can change anything or leave the machine,
and whether an interrupted call to it may be sent again. The gate, the Cedar gate,
taint, the summary, risk and the worker ask ``policies.kinds.rules_of`` and never
branch on a kind themselves. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from contracts import (
    Connector,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PlanStep,
    ToolPool,
)

__all__ = ["KindRules", "Said", "Wrong", "require_str", "short", "string_into", "text_of"]

_SHOWN = 160  # characters of a prompt or a note shown in a sentence

# Called with (input key, what it should be) for a value the Cedar context cannot hold.
Wrong = Callable[[str, str], None]


@dataclass(frozen=True)
class Said:
    """A step's sentence on the plan card, and what it adds to the plan's lists."""

    text: str
    destination: str | None = None  # "GET api.example.com"
    command: str | None = None  # the program it runs
    tool: str | None = None  # "read_file (fs)"
    agent: bool = False  # it asks an agent


def short(value: JsonValue) -> str:
    """Text as it is, anything else as JSON, on one line and cut at 160 characters:
    one style of value in every sentence."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(shown.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def text_of(given: JsonObject, key: str, default: str = "") -> str:
    """``given[key]`` when it is a string, else ``default``."""
    value = given.get(key, default)
    return value if isinstance(value, str) else default


def string_into(out: JsonObject, given: JsonObject, key: str, wrong: Wrong) -> None:
    """``given[key]`` into the Cedar context ``out`` when it is a string; else ``wrong``."""
    value = given.get(key)
    if isinstance(value, str):
        out[key] = value
    else:
        wrong(key, "a string")


def require_str(step: PlanStep, step_input: JsonObject, key: str) -> str:
    """``step_input[key]``, or ``plan_invalid`` when it is not a string."""
    value = step_input.get(key)
    if not isinstance(value, str):
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step.step_id!r} needs a string {key!r} in its input",
            {"step_id": step.step_id},
        )
    return value


class KindRules:
    """A kind's answers; a subclass sets ``kind`` and overrides what differs."""

    kind: ClassVar[DriverKind]
    # Its output comes from outside (the network, a program, an agent): a step it
    # feeds through input_from takes a value nobody approved.
    outside_data: ClassVar[bool] = True
    # Positions of its input an outside value may never fill, whatever a profile
    # says ("" is the whole input): where a request goes, which program runs.
    never_data: ClassVar[tuple[str, ...]] = ()
    # An agent's turn: it counts a model turn, is reconciled after a crash, runs
    # under the profile's executor policy and writes its step record after the turn.
    agent_turn: ClassVar[bool] = False
    # It runs a program on this machine: the sandbox rule for programs holds
    # (``unsandboxed_shell``).
    runs_a_program: ClassVar[bool] = False
    # The Cedar entity types its action applies to.
    cedar_resources: ClassVar[tuple[str, ...]] = ("Connector",)

    def check_input(
        self, step: PlanStep, step_input: JsonObject, connector: Connector, details: JsonObject
    ) -> None:
        """Refuse (raise) what the gate refuses in a known input: a destination or
        command the connector does not allow, anything its handler would refuse."""

    def cedar_schema(self, pools: Sequence[ToolPool]) -> dict[str, JsonValue]:
        """The attributes its input adds to the Cedar context (schema form)."""
        return {}

    def cedar_context(self, step_input: JsonObject, pool: ToolPool, wrong: Wrong) -> JsonObject:
        """Those attributes for ``step_input``; a value the context cannot hold as it
        is goes to ``wrong`` (which denies) rather than being left out."""
        return {}

    def cedar_resource(self, connector_id: str, step_input: JsonObject | None) -> JsonObject | None:
        """The Cedar resource when it is not the connector (None: the connector)."""
        return None

    def said(self, given: JsonObject, connector_id: str) -> Said:
        """Its sentence on the plan card."""
        return Said(f"Runs a {self.kind.value} step")

    def request(
        self, given: JsonObject, connector_id: str, connector: Connector | None
    ) -> str | None:
        """What its handler will send, as far as the plan fixes it (None: nothing one
        request can show)."""
        return None

    def read_only(self, step_input: JsonObject | None, connector: Connector | None) -> bool:
        """It cannot change anything, as far as its input is known (None: not known)."""
        return False

    def leaves_machine(self, given: JsonObject | None, connector: Connector | None) -> bool:
        """It may reach beyond this machine (``connector`` None: the pool is not known)."""
        return False

    def may_resend(self, connector: Connector, step_input: JsonObject) -> bool:
        """An interrupted call to it may be sent again with the same key."""
        return False

    def outside_value_problem(self, value: JsonValue) -> str | None:
        """Why an outside value, resolved, may not fill its position (None: it may)."""
        return None
