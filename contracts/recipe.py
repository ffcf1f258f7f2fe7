"""Recipes (``ds.gatehouse_recipe_v1``): the named things a user may ask for.

A ``template`` recipe compiles objective + parameters into a plan with no
model: ``{{name}}`` in a string is replaced by a parameter (a whole-string
placeholder keeps the parameter's JSON type). A ``model`` recipe asks the
configured OpenAI-compatible planner, with the prompt given here. An
``opencode`` recipe compiles in the run's OpenCode session with the *plan*
agent (edits denied) and structured output in the plan contract's schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed, Identifier, ShortText
from contracts._json import JsonObject


def _any_object() -> JsonObject:
    return {"type": "object"}


__all__ = ["Recipe"]


class Recipe(Closed):
    schema_id: Literal["ds.gatehouse_recipe_v1"] = "ds.gatehouse_recipe_v1"
    recipe_id: Identifier
    title: ShortText
    planner: Literal["template", "model", "opencode"]
    parameters_schema: JsonObject = Field(default_factory=_any_object)
    plan_template: JsonObject | None = None
    model_prompt: str | None = None
