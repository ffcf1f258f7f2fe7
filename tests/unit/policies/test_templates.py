"""Unit tests for template recipes (policies.templates.compile_template)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    Recipe,
    canonical_json,
    validate_instance,
)
from policies import catalog
from policies.gate import gate_plan
from policies.templates import compile_template

PARAMETERS: JsonObject = {
    "n": 3,
    "x": 1.5,
    "flag": True,
    "nothing": None,
    "s": "text",
    "items": [1, "two", None],
    "obj": {"b": 1, "a": "é"},
}


def _recipe(template: JsonObject | None, planner: str = "template") -> Recipe:
    return Recipe.model_validate(
        {"recipe_id": "t", "title": "test", "planner": planner, "plan_template": template}
    )


def _fill(value: JsonValue, parameters: JsonObject = PARAMETERS) -> JsonValue:
    """Compile a template whose only interesting part is ``value`` and return its filling."""
    compiled = compile_template(_recipe({"objective": "o", "value": value}), "obj", parameters)
    return compiled["value"]


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_whole_string_placeholder_keeps_the_json_type(name: str) -> None:
    assert _fill("{{" + name + "}}") == PARAMETERS[name]
    assert type(_fill("{{" + name + "}}")) is type(PARAMETERS[name])


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("n={{n}}", "n=3"),
        ("{{x}}!", "1.5!"),
        ("is {{flag}}", "is true"),
        ("[{{nothing}}]", "[null]"),
        ("say {{s}}", "say text"),  # a string is spelled as itself, not as JSON
        ("{{items}} ", '[1,"two",null] '),
        ("obj: {{obj}}", 'obj: {"a":"é","b":1}'),  # canonical JSON: sorted, no spaces, UTF-8
        ("{{n}}{{s}}", "3text"),
        ("{{n}} and {{n}}", "3 and 3"),
    ],
)
def test_embedded_placeholder_is_spelled_as_text(template: str, expected: str) -> None:
    assert _fill(template) == expected


def test_replacement_text_is_taken_literally() -> None:
    """Backslashes and group references in a value are not regex replacement syntax."""
    params: JsonObject = {"v": r"a\1b\g<0>$1"}
    assert _fill("<{{v}}>", params) == r"<a\1b\g<0>$1>"


def test_placeholders_are_filled_in_nested_lists_and_objects() -> None:
    template: JsonValue = {"a": ["{{n}}", {"b": "x{{s}}"}, 7, None, False]}
    assert _fill(template) == {"a": [3, {"b": "xtext"}, 7, None, False]}


def test_objective_and_parameters() -> None:
    recipe = _recipe(
        {"objective": "{{objective}}", "all": "{{parameters}}", "text": "p={{parameters}}"}
    )
    compiled = compile_template(recipe, "Count the files", {"k": "v", "n": 1})
    assert compiled["objective"] == "Count the files"
    assert compiled["all"] == {"k": "v", "n": 1}
    assert compiled["text"] == 'p={"k":"v","n":1}'
    assert compiled["schema_id"] == "env.mova_agent_plan_v1"


def test_objective_wins_over_a_parameter_of_the_same_name() -> None:
    compiled = compile_template(_recipe({"o": "{{objective}}"}), "real", {"objective": "fake"})
    assert compiled["o"] == "real"


@pytest.mark.parametrize("template", ["{{missing}}", "a {{missing}} b", "{{n}} {{missing}}"])
def test_unknown_placeholder_is_planner_failed(template: str) -> None:
    with pytest.raises(GatehouseError) as info:
        _fill(template)
    assert info.value.code is ErrorCode.PLANNER_FAILED
    assert info.value.details == {"placeholder": "missing"}


@pytest.mark.parametrize("text", ["{{ n }}", "{{N}}", "{{n + 1}}", "{n}", "{{n}", "{{__class__}"])
def test_anything_else_is_literal_text_never_evaluated(text: str) -> None:
    assert _fill(text) == text


def test_recipe_without_template_is_planner_failed() -> None:
    with pytest.raises(GatehouseError) as info:
        compile_template(_recipe(None, planner="model"), "o", {})
    assert info.value.code is ErrorCode.PLANNER_FAILED


@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
)
def test_substituted_values_are_not_expanded_again(value: JsonValue) -> None:
    """A parameter is data: placeholders inside it stay as they are."""
    params: JsonObject = {"p": value, "trap": "{{objective}}"}
    assert _fill("{{p}}", params) == value
    assert _fill("{{trap}}", params) == "{{objective}}"
    assert _fill("x{{trap}}", params) == "x{{objective}}"
    expected = value if isinstance(value, str) else canonical_json(value)
    assert _fill("<{{p}}>", params) == f"<{expected}>"


# --- the shipped template recipes --------------------------------------------------------------

DEFAULT_POOL = catalog.tool_pool("default").model
DEFAULT_PROFILE = catalog.profile("default").model


def test_demo_inventory_compiles_to_a_valid_allowed_plan() -> None:
    recipe = catalog.recipe("demo-inventory").model
    parameters: JsonObject = {"base_url": "http://127.0.0.1:8765"}
    catalog.check_parameters(recipe, parameters)
    compiled = compile_template(recipe, "Inventory check", parameters)
    validate_instance("env.mova_agent_plan_v1", compiled, ErrorCode.PLAN_INVALID)
    plan = Plan.model_validate(compiled)
    gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)
    assert plan.objective == "Inventory check"
    assert [s.step_id for s in plan.steps] == ["announce", "fetch", "checksum", "size", "report"]
    fetch = plan.steps[1]
    assert fetch.input is not None
    assert fetch.input["url"] == "http://127.0.0.1:8765/inventory.json"


def test_demo_inventory_compiled_for_another_host_is_refused_by_the_gate() -> None:
    """Even when parameter validation is skipped, the gate stops a foreign destination."""
    recipe = catalog.recipe("demo-inventory").model
    compiled = compile_template(recipe, "o", {"base_url": "http://169.254.169.254"})
    plan = Plan.model_validate(compiled)
    with pytest.raises(GatehouseError) as info:
        gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)
    assert info.value.code is ErrorCode.DESTINATION_NOT_ALLOWED


def test_echo_recipe_compiles_to_a_valid_allowed_plan() -> None:
    recipe = catalog.recipe("echo").model
    parameters: JsonObject = {"anything": [1, {"nested": True}]}
    compiled = compile_template(recipe, "Echo", parameters)
    validate_instance("env.mova_agent_plan_v1", compiled, ErrorCode.PLAN_INVALID)
    plan = Plan.model_validate(compiled)
    gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)
    assert plan.steps[0].input == {"parameters": parameters}


def test_echo_recipe_refuses_parameters_that_carry_results() -> None:
    """Parameters end up in the plan, so results smuggled in them are still refused."""
    compiled = compile_template(catalog.recipe("echo").model, "Echo", {"stdout": "fake"})
    with pytest.raises(GatehouseError) as info:
        gate_plan(Plan.model_validate(compiled), DEFAULT_POOL, DEFAULT_PROFILE)
    assert info.value.code is ErrorCode.PLAN_CONTAINS_RESULTS
