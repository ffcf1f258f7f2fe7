"""The shim's rules for runs from OPA archives: which recipe, and the autonomous budgets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts import Budgets, ErrorCode, GatehouseError, OpaPolicy
from shim.api.services.opa_runs import autonomous_budgets, choose_recipe

POLICY = OpaPolicy(recipes=["model-plan", "echo"], default_recipe="model-plan")


@pytest.mark.parametrize(
    ("hint", "asked", "chosen"),
    [
        ("echo", None, "echo"),  # an allowed hint wins
        (" echo ", "model-plan", "echo"),  # over the submitter's choice too
        ("claude-code", "echo", "echo"),  # a hint the profile does not allow is no choice
        ("claude-code", None, "model-plan"),  # then the default
        (None, None, "model-plan"),
    ],
)
def test_recipe_choice(hint: str | None, asked: str | None, chosen: str) -> None:
    assert choose_recipe(POLICY, hint, asked) == chosen


def test_a_recipe_outside_the_profile_is_refused() -> None:
    with pytest.raises(GatehouseError) as refused:
        choose_recipe(POLICY, None, "demo-inventory")
    assert refused.value.code is ErrorCode.OPA_RECIPE_NOT_ALLOWED
    with pytest.raises(GatehouseError) as none:
        choose_recipe(OpaPolicy(), "echo", None)
    assert none.value.code is ErrorCode.OPA_RECIPE_NOT_ALLOWED


def test_the_default_recipe_must_be_allowed() -> None:
    with pytest.raises(ValidationError):
        OpaPolicy(recipes=["echo"], default_recipe="model-plan")


def test_autonomous_budgets_are_never_wider_than_the_profile() -> None:
    wide = Budgets(max_model_turns=100, max_tokens=2_000_000, max_steps=9)
    assert autonomous_budgets(wide) == Budgets(max_model_turns=50, max_tokens=200_000)
    narrow = Budgets(max_model_turns=10, max_tokens=None)
    assert autonomous_budgets(narrow) == Budgets(max_model_turns=10, max_tokens=200_000)
    # What the run gets passes the profile's own narrowing check.
    assert wide.narrowed(autonomous_budgets(wide)).max_steps == 9
    # A profile may hold its autonomous runs to less than the spec recommends.
    tight = OpaPolicy(autonomous_max_turns=3, autonomous_max_tokens=1000)
    assert autonomous_budgets(wide, tight) == Budgets(max_model_turns=3, max_tokens=1000)
