"""Run budgets: the limits a run is held to, and what it has spent of them.

A policy profile sets ``budgets`` (generous by default) and a price table per
model; an intent may *narrow* them, never widen them: a value above the
profile's is refused at submit with ``budget_widened``. The run uses the
effective budgets, the smaller of the two for each kind.

What counts (see ``worker/flow/_budgets.py``, which does the counting):

* ``max_steps`` — tool calls executed. Every attempt counts (a retry after
  ``upstream_unavailable``, a timeout ladder's re-prompt): each one ran.
* ``max_model_turns`` — model calls: a model planner's compile (OpenAI-
  compatible or OpenCode) and every OpenCode turn (repair and explain turns
  count too, once they exist).
* ``max_tokens`` — prompt plus completion tokens, as the providers reported
  them in their usage.
* ``max_cost_usd`` — tokens priced with the profile's ``prices`` for the model
  that reported them; a model without a price costs nothing.
* ``max_wall_s`` — the run's time in calls: each call's recorded duration in
  the ledger, plus retry backoffs. Waiting for a person (approval, an
  operator's resolution) does not count.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed
from contracts._errors import ErrorCode, GatehouseError
from contracts._json import JsonObject

__all__ = [
    "BUDGET_KINDS",
    "DEFAULT_BUDGETS",
    "BudgetKind",
    "BudgetUse",
    "Budgets",
    "BudgetsView",
    "Price",
]

BudgetKind = Literal["max_steps", "max_model_turns", "max_tokens", "max_cost_usd", "max_wall_s"]
BUDGET_KINDS: tuple[BudgetKind, ...] = (
    "max_steps",
    "max_model_turns",
    "max_tokens",
    "max_cost_usd",
    "max_wall_s",
)


class Price(Closed):
    """US dollars per million tokens, one model."""

    prompt_per_mtok: float = Field(ge=0, le=10_000)
    completion_per_mtok: float = Field(ge=0, le=10_000)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What these tokens cost, in US dollars."""
        return (
            prompt_tokens * self.prompt_per_mtok + completion_tokens * self.completion_per_mtok
        ) / 1_000_000


class Budgets(Closed):
    """Limits; ``None`` is no limit of that kind."""

    max_steps: int | None = Field(default=None, ge=1, le=100_000)
    max_model_turns: int | None = Field(default=None, ge=1, le=100_000)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000_000)
    max_cost_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    max_wall_s: float | None = Field(default=None, gt=0, le=30 * 86400)

    def narrowed(self, by: Budgets | None) -> Budgets:
        """These limits narrowed by an intent's: each the smaller of the two.

        An intent's value above this one is ``budget_widened``: a submitter may
        ask for less than the profile allows, never for more.
        """
        if by is None:
            return self
        merged: JsonObject = {}
        for kind in BUDGET_KINDS:
            mine, theirs = getattr(self, kind), getattr(by, kind)
            if theirs is not None and mine is not None and theirs > mine:
                raise GatehouseError(
                    ErrorCode.BUDGET_WIDENED,
                    f"{kind} {theirs} is above the profile's limit {mine}",
                    {"budget": kind, "requested": theirs, "limit": mine},
                )
            merged[kind] = mine if theirs is None else theirs
        return Budgets.model_validate(merged)


def _default_budgets() -> Budgets:
    # Generous: they stop a runaway run, not an ordinary one.
    return Budgets(
        max_steps=500,
        max_model_turns=200,
        max_tokens=5_000_000,
        max_cost_usd=100.0,
        max_wall_s=6 * 3600.0,
    )


class BudgetUse(Closed):
    """What a run has spent, counted from its recorded calls."""

    steps: int = 0
    model_turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class BudgetsView(Closed):
    """Used / limit, as the plan card and ``gatehouse show`` display them."""

    limits: Budgets
    used: BudgetUse
    # The budget that ended the run, if one did.
    exceeded: BudgetKind | None = None
    # For people: "used / limit" per kind, e.g. {"max_tokens": "1,234 / 5,000,000"}.
    summary: dict[str, str] = Field(default_factory=dict)


DEFAULT_BUDGETS = _default_budgets()
