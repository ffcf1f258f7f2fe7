"""Budgets: narrowing at submit, and the pure account the flow keeps of recorded calls."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import Budgets, ErrorCode, GatehouseError, Price
from contracts.budgets import DEFAULT_BUDGETS
from worker.flow import Spent, usage_of
from worker.planners import usage_from


def _call(target: str, *, usage: dict[str, Any] | None = None, ms: int = 0) -> dict[str, Any]:
    output: dict[str, Any] = {} if usage is None else {"usage": usage}
    return {"op_key": "k" * 64, "target": target, "duration_ms": ms, "output": output}


def test_an_intent_narrows_and_never_widens() -> None:
    profile = Budgets(max_steps=10, max_tokens=1000)
    narrowed = profile.narrowed(Budgets(max_steps=3, max_cost_usd=1.5))
    assert narrowed == Budgets(max_steps=3, max_tokens=1000, max_cost_usd=1.5)
    assert profile.narrowed(None) is profile
    with pytest.raises(GatehouseError) as refused:
        profile.narrowed(Budgets(max_tokens=1001))
    assert refused.value.code is ErrorCode.BUDGET_WIDENED
    assert refused.value.details == {"budget": "max_tokens", "requested": 1001, "limit": 1000}
    assert ErrorCode.BUDGET_WIDENED.spec.number == 1013
    assert ErrorCode.BUDGET_EXCEEDED.spec.number == 4018
    assert ErrorCode.BUDGET_EXCEEDED.spec.http_status == 429
    assert not ErrorCode.BUDGET_EXCEEDED.retryable


def test_the_default_budgets_are_all_set() -> None:
    assert all(v is not None for v in DEFAULT_BUDGETS.model_dump().values())


def test_steps_and_turns_are_checked_before_the_call() -> None:
    spent = Spent(Budgets(max_steps=2, max_model_turns=2), {})
    spent.add_call(_call("openai_compat", usage={"prompt_tokens": 5}), tool=False)
    assert spent.before(tool=True, model_turn=True) is None
    spent.add_call(_call("opencode"), tool=True)
    assert (spent.use.steps, spent.use.model_turns) == (1, 2)
    assert spent.before(tool=True, model_turn=False) is None  # a noop: no model turn
    exceeded = spent.before(tool=True, model_turn=True)
    assert exceeded is not None and exceeded.budget == "max_model_turns"
    assert exceeded.message == "max_model_turns: 2 used of 2; the next call would cross it"
    assert spent.view().exceeded == "max_model_turns"


def test_tokens_cost_and_wall_are_checked_after_the_call() -> None:
    prices = {"m": Price(prompt_per_mtok=2.0, completion_per_mtok=10.0)}
    spent = Spent(Budgets(max_tokens=1000, max_cost_usd=0.01, max_wall_s=5), prices)
    usage = {"model": "m", "prompt_tokens": 600, "completion_tokens": 300}
    spent.add_call(_call("openai_compat", usage=usage, ms=1500), tool=False)
    assert spent.crossed() is None
    assert spent.use.cost_usd == pytest.approx(0.0042)
    assert spent.view().summary["max_tokens"] == "900 / 1,000"
    spent.add_call(_call("opencode", usage=usage, ms=10), tool=True)
    exceeded = spent.crossed()
    assert exceeded is not None and exceeded.budget == "max_tokens"
    assert exceeded.message == "max_tokens: 1,800 used of 1,000"


def test_cost_prices_only_known_models_and_wall_counts_backoffs() -> None:
    spent = Spent(Budgets(max_cost_usd=0.001, max_wall_s=2), {})
    spent.add_call(
        _call("opencode", usage={"model": "unpriced", "prompt_tokens": 10**6}), tool=True
    )
    assert spent.use.cost_usd == 0.0
    spent.add_pause(1.5)
    spent.add_call(_call("noop", ms=600), tool=True)
    exceeded = spent.crossed()
    assert exceeded is not None and exceeded.budget == "max_wall_s"
    assert exceeded.message == "max_wall_s: 2.1 s used of 2.0 s"


def test_a_call_refused_before_it_was_made_spends_nothing() -> None:
    spent = Spent(Budgets(), {})
    spent.add_call({"op_key": None, "target": "openai_compat", "output": {}}, tool=False)
    assert spent.use.model_turns == 0


def test_usage_is_read_defensively() -> None:
    assert usage_of({"output": {"usage": {"prompt_tokens": -3, "completion_tokens": True}}}) == (
        usage_of({})
    )
    completion = {"model": "gpt-x", "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
    assert usage_from(completion, "planner") == {
        "model": "gpt-x",
        "prompt_tokens": 7,
        "completion_tokens": 2,
    }
    assert usage_from({}, "planner") == {
        "model": "planner",
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }


def test_a_turn_is_allowed_what_the_run_has_left() -> None:
    prices = {"m": Price(prompt_per_mtok=2.0, completion_per_mtok=10.0)}
    spent = Spent(Budgets(max_tokens=1000, max_cost_usd=0.01, max_wall_s=5), prices)
    usage = {"model": "m", "prompt_tokens": 600, "completion_tokens": 300}
    spent.add_call(_call("openai_compat", usage=usage, ms=1500), tool=False)
    left = spent.allowance()
    assert (left.tokens, left.cost_usd, left.wall_s) == (100, 0.0058, 3.5)
    assert left.prices == prices
    # no limit, no allowance of that kind
    open_ended = Spent(Budgets(max_steps=3), {}).allowance()
    assert (open_ended.tokens, open_ended.cost_usd, open_ended.wall_s) == (None, None, None)
