"""How much a plan step can do, in three classes an approver sorts by.

``read``: it cannot change anything and stays on this machine (``step_read_only``
answers the first half: a note, an http GET or HEAD, an MCP tool the pool lists
as read-only).

``change``: it can change something on this machine: a program run in the
sandbox (which has no network), an OpenCode agent editing the run's workspace,
an http call other than GET or HEAD to a loopback address, an MCP tool on a
local (stdio) server that the pool does not list as read-only.

``outside world``: it reaches beyond this machine, whatever its method: an http
call to an address that is not loopback, or a call to an MCP server over http
that is not on loopback. What leaves the machine may change something nobody
here can undo, so a GET to another host counts, too. An http step whose address
is not known yet (it comes from outside data) counts as outside unless every
destination its connector allows is loopback. Without the tool pool (a pool
since removed) such an http step, and any MCP step, is outside: nothing says it
stays here.

OpenCode is ``change``: its agent works in the run's workspace under the
profile's executor policy, whose web permissions are denied unless a profile
says otherwise; that policy, not this class, is what holds the agent.

Pure: from the step, its input and the tool pool's connector alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from contracts import Connector, Plan, PlanStep, ToolPool
from policies.kinds import rules_of
from policies.read_only import step_read_only

__all__ = ["Risk", "plan_risk", "plan_risks", "risk_words", "step_risk"]


class Risk(Enum):
    """Ordered from the least to the most an approver must look at."""

    READ = "read"
    CHANGE = "change"
    OUTSIDE = "outside world"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    @property
    def meaning(self) -> str:
        """The class in a few words, for a ⚠'s tooltip."""
        return _MEANINGS[self]

    @property
    def warns(self) -> bool:
        """Whether the step earns a ⚠ on a plan card."""
        return self is not Risk.READ


_RANKS = {Risk.READ: 0, Risk.CHANGE: 1, Risk.OUTSIDE: 2}
_MEANINGS = {
    Risk.READ: "changes nothing and stays on this machine",
    Risk.CHANGE: "can change something on this machine",
    Risk.OUTSIDE: "reaches beyond this machine",
}


def step_risk(step: PlanStep, connector: Connector | None) -> Risk:
    """The step's class (module docstring); ``connector``: the pool's, None if unknown."""
    given = step.input
    if rules_of(step.driver_kind).leaves_machine(given, connector):
        return Risk.OUTSIDE
    return Risk.READ if step_read_only(step, given, connector) else Risk.CHANGE


def plan_risks(plan: Plan, pool: ToolPool | None) -> list[Risk]:
    """Each step's class, in the plan's order."""
    return [
        step_risk(s, pool.connector(s.connector_id) if pool is not None else None)
        for s in plan.steps
    ]


def risk_words(risks: Iterable[Risk]) -> str:
    """The classes that earn a ⚠, most first, with how many steps each:
    ``outside world (1 step), change (2 steps)``; ``read only`` when none does."""
    counts = dict.fromkeys(Risk, 0)
    for r in risks:
        counts[r] += 1
    parts = [
        f"{r.value} ({counts[r]} step{'' if counts[r] == 1 else 's'})"
        for r in sorted(Risk, key=lambda r: -r.rank)
        if r.warns and counts[r]
    ]
    return ", ".join(parts) if parts else "read only"


def plan_risk(plan: Plan, pool: ToolPool | None) -> str:
    """``risk_words`` of the plan, judged with ``pool`` (the run's own tool pool); without
    it (an MCP step, or an http step whose address is not known yet, counts as outside)
    the words say so."""
    words = risk_words(plan_risks(plan, pool))
    return words if pool is not None else f"{words} (judged without the run's tool pool)"
