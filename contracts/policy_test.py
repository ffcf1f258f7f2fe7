"""Policy tests as files (``gatehouse policy test``): plans, who submits them, and the
gate's expected decision on each step, run under a profile and its Cedar policy set.

A file (JSON)::

    {
      "description": "what the policies should do",
      "profile": "guarded",
      "tool_pool": "default",
      "cases": [
        {
          "name": "a read goes through",
          "submitted_by": "alice",
          "plan": {"objective": "...", "steps": [...]},
          "inputs": {"step_id": {...}},
          "expect": {"fetch": "allow", "post": "cedar_denied"}
        }
      ]
    }

``expect`` maps each step id to ``allow``, ``deny`` (refused, for any reason) or the
error code that refuses it; or to ``{"decision": …, "policies": [@id, …]}`` to name
the Cedar policies that deny it too. ``inputs`` gives a step's input as resolved right
before it runs (a step taking an earlier step's output); without it, the plan's own.
Every step of the plan must have an expectation.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from contracts._base import Closed, Identifier, ShortText
from contracts._json import JsonObject
from contracts.plan import Plan

__all__ = ["PolicyExpectation", "PolicyTestCase", "PolicyTestFile"]

Decision = Annotated[str, StringConstraints(pattern=r"^(allow|deny|[a-z_]{3,64})$")]


class PolicyExpectation(Closed):
    decision: Decision
    policies: list[str] | None = None  # exactly these Cedar policy ids deny the step


class PolicyTestCase(Closed):
    name: ShortText
    submitted_by: Identifier = "anonymous"
    plan: Plan
    inputs: dict[str, JsonObject] = Field(default_factory=dict)
    expect: dict[str, Decision | PolicyExpectation] = Field(min_length=1)


class PolicyTestFile(Closed):
    description: ShortText | None = None
    profile: Identifier
    tool_pool: Identifier = "default"
    cases: list[PolicyTestCase] = Field(min_length=1, max_length=10_000)
