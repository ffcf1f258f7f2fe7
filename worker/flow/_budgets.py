"""Budgets: what a run has spent, and whether a limit is crossed. Pure.

What was spent is a function of the run's *recorded* calls only: each call's
result as the ledger holds it (its ``output.usage`` for a model call, its
``target``, its recorded ``duration_ms``) and the backoffs the flow chose from
the run's seed. A workflow recovered after a crash is served the same
recorded results by DBOS, and a replay by the ledger, so both count exactly
what the live run counted: nothing resets, nothing drifts.

The flow asks twice per call:

* ``before`` — would this next call cross a count limit (steps, model
  turns)? Then it is not made.
* ``crossed`` — after the call is recorded: is any limit now exceeded
  (tokens, cost, wall time, and the counts)? Then the run ends.

``contracts/budgets.py`` says what each kind counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import (
    BUDGET_KINDS,
    BudgetKind,
    Budgets,
    BudgetsView,
    BudgetUse,
    JsonObject,
    JsonValue,
    Price,
)
from contracts.execution import TurnAllowance

__all__ = ["MODEL_TARGETS", "Exceeded", "Ledgered", "Spent", "usage_of"]

# Call targets that are a model turn: the model planners, and OpenCode turns
# (its compile as a provider call, its build turns as tool calls).
MODEL_TARGETS = frozenset({"openai_compat", "opencode"})


@dataclass(frozen=True)
class Exceeded:
    """The budget that stopped a run, with what was used and the limit."""

    budget: BudgetKind
    used: float
    limit: float
    before_call: bool  # the next call was not made (a count limit) vs. spent past it

    @property
    def message(self) -> str:
        used, limit = _show(self.budget, self.used), _show(self.budget, self.limit)
        if self.before_call:
            return f"{self.budget}: {used} used of {limit}; the next call would cross it"
        return f"{self.budget}: {used} used of {limit}"


def _show(kind: BudgetKind, value: float) -> str:
    if kind == "max_cost_usd":
        return f"${value:,.4f}"
    if kind == "max_wall_s":
        return f"{value:,.1f} s"
    return f"{int(value):,}"


def _int(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class Ledgered:
    """The usage a recorded model call reported (zeros when it reported none)."""

    model: str | None
    prompt_tokens: int
    completion_tokens: int


def usage_of(result: JsonObject) -> Ledgered:
    """``output.usage`` of a recorded call: ``{model, prompt_tokens, completion_tokens}``."""
    output = result.get("output")
    usage = output.get("usage") if isinstance(output, dict) else None
    if not isinstance(usage, dict):
        return Ledgered(None, 0, 0)
    model = usage.get("model")
    return Ledgered(
        model if isinstance(model, str) else None,
        _int(usage.get("prompt_tokens")),
        _int(usage.get("completion_tokens")),
    )


def _cost(used: Ledgered, prices: dict[str, Price]) -> float:
    price = prices.get(used.model) if used.model is not None else None
    return 0.0 if price is None else price.cost(used.prompt_tokens, used.completion_tokens)


class Spent:
    """The running account of one run, fed every call result in order."""

    def __init__(self, limits: Budgets, prices: dict[str, Price]) -> None:
        self.limits = limits
        self.prices = prices
        self.use = BudgetUse()
        self.exceeded: Exceeded | None = None

    def add_call(self, result: JsonObject, *, tool: bool) -> None:
        """One recorded call: a tool call is a step; a model's call a model turn."""
        target = result.get("target")
        if result.get("op_key") is None:
            return  # refused before anything was called: nothing spent
        used = usage_of(result)
        duration = result.get("duration_ms")
        ms = duration if isinstance(duration, int) and duration > 0 else 0
        u = self.use
        self.use = u.model_copy(
            update={
                "steps": u.steps + (1 if tool else 0),
                "model_turns": u.model_turns + (1 if target in MODEL_TARGETS else 0),
                "prompt_tokens": u.prompt_tokens + used.prompt_tokens,
                "completion_tokens": u.completion_tokens + used.completion_tokens,
                "cost_usd": round(u.cost_usd + _cost(used, self.prices), 6),
                "wall_s": round(u.wall_s + ms / 1000, 3),
            }
        )

    def add_pause(self, seconds: float) -> None:
        """A retry backoff: time the run spent, though no call ran."""
        self.use = self.use.model_copy(update={"wall_s": round(self.use.wall_s + seconds, 3)})

    def _amounts(self) -> dict[BudgetKind, float]:
        u = self.use
        return {
            "max_steps": u.steps,
            "max_model_turns": u.model_turns,
            "max_tokens": u.tokens,
            "max_cost_usd": u.cost_usd,
            "max_wall_s": u.wall_s,
        }

    def before(self, *, tool: bool, model_turn: bool) -> Exceeded | None:
        """Would the next call cross a count limit? (Noted as the run's exceeded budget.)"""
        amounts = self._amounts()
        nexts: list[tuple[BudgetKind, bool]] = [
            ("max_steps", tool),
            ("max_model_turns", model_turn),
        ]
        for kind, counts in nexts:
            limit = getattr(self.limits, kind)
            if counts and limit is not None and amounts[kind] + 1 > limit:
                self.exceeded = Exceeded(kind, amounts[kind], limit, before_call=True)
                return self.exceeded
        return self.exceeded if self.exceeded is not None else self.crossed()

    def crossed(self) -> Exceeded | None:
        """The first budget now spent past its limit, in BUDGET_KINDS order."""
        if self.exceeded is not None:
            return self.exceeded
        amounts = self._amounts()
        for kind in BUDGET_KINDS:
            limit = getattr(self.limits, kind)
            if limit is not None and amounts[kind] > limit:
                self.exceeded = Exceeded(kind, amounts[kind], limit, before_call=False)
                return self.exceeded
        return None

    def allowance(self) -> TurnAllowance:
        """What is left of each spend limit, for an OpenCode turn to stop at."""
        amounts = self._amounts()

        def left(kind: BudgetKind) -> float | None:
            limit = getattr(self.limits, kind)
            return None if limit is None else max(0.0, limit - amounts[kind])

        tokens = left("max_tokens")
        cost, wall = left("max_cost_usd"), left("max_wall_s")
        return TurnAllowance(
            tokens=None if tokens is None else int(tokens),
            cost_usd=None if cost is None else round(cost, 6),
            wall_s=None if wall is None else round(wall, 3),
            prices=dict(self.prices),
        )

    def view(self) -> BudgetsView:
        exceeded = None if self.exceeded is None else self.exceeded.budget
        amounts = self._amounts()
        summary = {}
        for kind in BUDGET_KINDS:
            limit = getattr(self.limits, kind)
            shown = "no limit" if limit is None else _show(kind, limit)
            summary[kind] = f"{_show(kind, amounts[kind])} / {shown}"
        return BudgetsView(limits=self.limits, used=self.use, exceeded=exceeded, summary=summary)

    def view_json(self) -> JsonObject:
        return self.view().model_dump(mode="json")

    def state_json(self) -> JsonObject:
        """The account as JSON, for a step to go on from (``from_state``)."""
        return {
            "limits": self.limits.model_dump(mode="json"),
            "prices": {k: v.model_dump(mode="json") for k, v in self.prices.items()},
            "use": self.use.model_dump(mode="json"),
        }

    @classmethod
    def from_state(cls, state: JsonObject) -> Spent:
        """The account ``state_json`` wrote (no budget crossed in it yet)."""
        prices = state.get("prices")
        spent = cls(
            Budgets.model_validate(state.get("limits")),
            {
                str(k): Price.model_validate(v)
                for k, v in (prices.items() if isinstance(prices, dict) else ())
            },
        )
        spent.use = BudgetUse.model_validate(state.get("use"))
        return spent

    def view_after(self, result: JsonObject) -> JsonObject:
        """The view once the tool call ``result`` is counted, as the flow records it."""
        self.add_call(result, tool=True)
        self.crossed()
        return self.view_json()
