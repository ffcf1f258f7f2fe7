"""Template recipes compiled into plans, no model needed (the recipe planner).

``{{name}}`` placeholders are replaced from the parameters (plus
``objective`` and ``parameters``, the whole object). A string that is only a
placeholder takes the value with its JSON type; a placeholder inside a
longer string is spelled as text. This is substitution, not an expression
language: there is nothing to evaluate.
"""

from __future__ import annotations

import re

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, Recipe, canonical_json

__all__ = ["compile_template"]

_WHOLE = re.compile(r"^\{\{([a-z_][a-z0-9_]*)\}\}$")
_PART = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def _fill(node: JsonValue, env: JsonObject) -> JsonValue:
    if isinstance(node, str):
        whole = _WHOLE.match(node)
        if whole:
            return env[_known(whole.group(1), env)]
        return _PART.sub(lambda m: _text(env[_known(m.group(1), env)]), node)
    if isinstance(node, list):
        return [_fill(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _fill(value, env) for key, value in node.items()}
    return node


def _known(name: str, env: JsonObject) -> str:
    if name not in env:
        raise GatehouseError(
            ErrorCode.PLANNER_FAILED,
            f"the recipe template uses {{{{{name}}}}}, which no parameter provides",
            {"placeholder": name},
        )
    return name


def compile_template(recipe: Recipe, objective: str, parameters: JsonObject) -> JsonObject:
    if recipe.plan_template is None:
        raise GatehouseError(
            ErrorCode.PLANNER_FAILED, f"recipe {recipe.recipe_id!r} has no plan template"
        )
    env: JsonObject = {**parameters, "objective": objective, "parameters": parameters}
    filled = _fill(recipe.plan_template, env)
    if not isinstance(filled, dict):  # pragma: no cover - a template is an object by schema
        raise GatehouseError(ErrorCode.PLANNER_FAILED, "the recipe template is not an object")
    return {"schema_id": "env.mova_agent_plan_v1", **filled}
