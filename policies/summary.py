"""A plan in plain words, for the person who decides on it.

It also spells, per step, the request its handler will send (``request_of``):
an http step's request line, headers (the plan's, secrets shown as •••, and
the ones the handler adds) and JSON body; a shell step's argv; an MCP step's
``tools/call``. Those are the plan's own values, which the digest covers, and
the handler's fixed additions, which the tool pool's digest pins.

Each step becomes one sentence saying what it will do (which address it sends
what to, which program it runs, what an agent is asked, which MCP tool it
calls) and whether it can change anything; the plan as a whole becomes the
lists an approver looks for first: where it goes on the network, what it runs,
which steps take outside data (an earlier step's output, which nobody approved),
and whether it is read-only. Pure: read from the plan alone, as approved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts import Connector, Plan, PlanStep, ToolPool
from policies.kinds import rules_of
from policies.risk import Risk, risk_words, step_risk
from policies.taint import tainted

__all__ = ["PlanSummary", "StepSummary", "request_of", "summarize"]


@dataclass(frozen=True)
class StepSummary:
    step_id: str
    title: str | None
    says: str  # one sentence: what the step will do
    outside: str | None  # where its outside data comes from, when it takes any
    risk: Risk  # read, change or outside world (``policies.risk``): what earns a ⚠
    request: str | None = None  # what its handler will send (None: nothing, or not known yet)


@dataclass
class PlanSummary:  # filled in step by step by ``summarize``
    steps: list[StepSummary]
    destinations: list[str] = field(default_factory=list)  # "GET api.example.com"
    commands: list[str] = field(default_factory=list)  # the programs run
    tools: list[str] = field(default_factory=list)  # MCP tools called
    agents: int = 0  # OpenCode steps
    outside_data: list[str] = field(default_factory=list)  # step ids

    @property
    def risk_line(self) -> str:
        """The steps that earn a ⚠, by class, most first (``policies.risk.risk_words``)."""
        return risk_words(s.risk for s in self.steps)


def _outside(step: PlanStep) -> str | None:
    came = step.input_from
    if came is None:
        return None
    part = f"{came.pointer} of " if came.pointer else ""
    into = f", into {came.into}" if came.into is not None else ""
    return f"takes {part}step {came.step_id}'s output{into}"


def _sentence(step: PlanStep, out: PlanSummary) -> str:
    said = rules_of(step.driver_kind).said(step.input or {}, step.connector_id)
    if said.destination is not None:
        out.destinations.append(said.destination)
    if said.command is not None:
        out.commands.append(said.command)
    if said.tool is not None:
        out.tools.append(said.tool)
    out.agents += said.agent
    return said.text


def request_of(step: PlanStep, connector: Connector | None) -> str | None:
    """What the step's handler will send, as far as the plan fixes it; None for a
    note, an agent's turn (a conversation, not one request), or an input that comes
    whole from an earlier step (not known until it runs)."""
    if step.input is None:  # the whole input comes from an earlier step
        return None
    return rules_of(step.driver_kind).request(step.input, step.connector_id, connector)


def summarize(plan: Plan, pool: ToolPool | None = None) -> PlanSummary:
    """``pool``: the run's tool pool, to spell each request as its connector sends it."""
    out = PlanSummary(steps=[])
    from_outside = tainted(plan)  # the steps whose output nobody approved
    for step in plan.steps:
        says = _sentence(step, out)
        fed = step.input_from is not None and step.input_from.step_id in from_outside
        if fed:
            out.outside_data.append(step.step_id)
        came = _outside(step) if fed else None
        connector = pool.connector(step.connector_id) if pool is not None else None
        request = request_of(step, connector)
        risk = step_risk(step, connector)
        out.steps.append(StepSummary(step.step_id, step.title, says, came, risk, request))
    return out
