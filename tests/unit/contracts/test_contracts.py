"""Unit tests for the contracts: committed schemas, plan rules, error codes, op keys, names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

import contracts
from contracts import (
    SCHEMA_MODELS,
    ErrorCode,
    GatehouseError,
    IntentRequest,
    Mode,
    Plan,
    validate_instance,
)
from contracts._schemas import render_schema
from ledger.calls import op_key

SCHEMA_DIR = Path(contracts.__file__).resolve().parent / "schemas"
EXPORT_HINT = "run `python -m contracts.export` and commit contracts/schemas/"


# --- committed schemas ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_matches_its_model(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.is_file(), f"{path} is missing: {EXPORT_HINT}"
    committed = json.loads(path.read_text(encoding="utf-8"))
    rendered = render_schema(name)
    assert committed == rendered, (
        f"contracts/schemas/{name}.schema.json is out of date with"
        f" {SCHEMA_MODELS[name].__module__}.{SCHEMA_MODELS[name].__name__}: {EXPORT_HINT}"
    )


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_is_spelled_as_export_writes_it(name: str) -> None:
    text = (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8")
    expected = json.dumps(render_schema(name), indent=2, sort_keys=True) + "\n"
    assert text == expected, (
        f"contracts/schemas/{name}.schema.json was edited by hand: {EXPORT_HINT}"
    )


def test_no_stray_schema_files() -> None:
    names = {p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json")}
    stray = sorted(names - set(SCHEMA_MODELS))
    assert not stray, f"schema files with no model in SCHEMA_MODELS: {stray}"


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == contracts.schema_id(name)


# --- the plan envelope ------------------------------------------------------------------------


def _step(step_id: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "step_id": step_id,
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
    }
    body.update(extra)
    if "input" not in body and "input_from" not in body:
        body["input"] = {}
    return body


def _plan(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"schema_id": "env.mova_agent_plan_v1", "objective": "o", "steps": list(steps), **extra}


def _refused_by_model(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Plan.model_validate(body)


def _refused_by_schema(body: dict[str, Any]) -> None:
    with pytest.raises(GatehouseError) as info:
        validate_instance("env.mova_agent_plan_v1", body, ErrorCode.PLAN_INVALID)
    assert info.value.code is ErrorCode.PLAN_INVALID


def test_a_plain_plan_is_valid() -> None:
    body = _plan(_step("a"), _step("b", input_from={"step_id": "a", "pointer": "/x"}))
    Plan.model_validate(body)
    validate_instance("env.mova_agent_plan_v1", body, ErrorCode.PLAN_INVALID)


@pytest.mark.parametrize("field", ["loop", "condition", "code", "script", "expression", "when"])
def test_plan_refuses_extra_fields(field: str) -> None:
    top = _plan(_step("a"), **{field: "x"})
    in_step = _plan(_step("a", **{field: "x"}))
    for body in (top, in_step):
        _refused_by_model(body)
        _refused_by_schema(body)


def test_plan_refuses_duplicate_step_ids() -> None:
    _refused_by_model(_plan(_step("a"), _step("a")))


@pytest.mark.parametrize("source", ["b", "a", "zzz"])
def test_input_from_must_name_an_earlier_step(source: str) -> None:
    """``b`` is later, ``a`` is the step itself, ``zzz`` does not exist."""
    body = _plan(_step("a", input_from={"step_id": source}), _step("b"))
    _refused_by_model(body)


def test_step_takes_exactly_one_input_source() -> None:
    both = _step("b", input={}, input_from={"step_id": "a"})
    neither = {k: v for k, v in _step("b").items() if k != "input"}
    _refused_by_model(_plan(_step("a"), both))
    _refused_by_model(_plan(_step("a"), neither))


@pytest.mark.parametrize(
    "body",
    [
        _plan(),
        _plan(_step("A")),
        _plan(_step("a", driver_kind="python")),
        _plan(_step("a", verb="exec")),
        _plan(_step("a", input="not an object")),
        _plan(_step("a", input_from={"step_id": "a", "pointer": "no-slash"})),
        _plan(_step("a"), schema_id="env.other_v1"),
    ],
)
def test_plan_refuses_malformed_shapes(body: dict[str, Any]) -> None:
    _refused_by_model(body)
    _refused_by_schema(body)


# --- the intent request -----------------------------------------------------------------------


def _intent(**extra: Any) -> dict[str, Any]:
    return {"recipe": "echo", "objective": "o", **extra}


def test_run_plan_requires_a_plan() -> None:
    with pytest.raises(ValidationError):
        IntentRequest.model_validate(_intent(mode="run-plan"))
    request = IntentRequest.model_validate(_intent(mode="run-plan", plan=_plan(_step("a"))))
    assert request.plan is not None


@pytest.mark.parametrize("mode", [m.value for m in Mode if m is not Mode.RUN_PLAN])
def test_a_plan_only_comes_with_run_plan(mode: str) -> None:
    with pytest.raises(ValidationError):
        IntentRequest.model_validate(_intent(mode=mode, plan=_plan(_step("a"))))
    assert IntentRequest.model_validate(_intent(mode=mode)).plan is None


def test_intent_request_is_closed() -> None:
    with pytest.raises(ValidationError):
        IntentRequest.model_validate(_intent(execute_now=True))


# --- error codes ------------------------------------------------------------------------------


def test_every_error_code_has_a_spec() -> None:
    for code in ErrorCode:
        spec = code.spec
        assert spec.summary, code
        assert code.http_status == spec.http_status
        assert code.retryable is spec.retryable


def test_error_numbers_are_unique() -> None:
    numbers = [code.spec.number for code in ErrorCode]
    duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
    assert not duplicates, f"error numbers used twice: {duplicates}"


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_error_http_status_is_4xx_or_5xx(code: ErrorCode) -> None:
    assert 400 <= code.http_status <= 599


def test_error_values_are_unique_snake_case() -> None:
    values = [code.value for code in ErrorCode]
    assert len(values) == len(set(values))
    bad = [v for v in values if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", v)]
    assert not bad, f"error values that are not snake_case: {bad}"


def test_gatehouse_error_to_json() -> None:
    error = GatehouseError(ErrorCode.NOT_FOUND, "nothing here", {"path": "/x"})
    assert error.to_json() == {
        "code": "not_found",
        "message": "nothing here",
        "retryable": False,
        "details": {"path": "/x"},
    }
    assert GatehouseError(ErrorCode.INTERNAL_ERROR, "m").details == {}


# --- op_key -----------------------------------------------------------------------------------


def test_op_key_is_deterministic_sha256_hex() -> None:
    key = op_key("run-1", "step", 1)
    assert key == op_key("run-1", "step", 1)
    assert re.fullmatch(r"[0-9a-f]{64}", key)


@pytest.mark.parametrize(
    "other", [("run-2", "step", 1), ("run-1", "step2", 1), ("run-1", "step", 2)]
)
def test_op_key_differs_when_any_field_differs(other: tuple[str, str, int]) -> None:
    assert op_key(*other) != op_key("run-1", "step", 1)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a", "bc", 1), ("ab", "c", 1)),
        (("a", "b1", 1), ("a", "b", 11)),
        (("1:a;", "b", 1), ("1", "a;1:b", 1)),
        (("", "ab", 1), ("ab", "", 1)),
    ],
)
def test_op_key_fields_do_not_run_together(
    left: tuple[str, str, int], right: tuple[str, str, int]
) -> None:
    assert op_key(*left) != op_key(*right)


# --- public names -----------------------------------------------------------------------------


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """Ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then the rest; natural within."""
    if name.isupper() and len(name) > 1:
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    return group, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name) if t]


def test_contracts_all_exists_and_is_sorted_unique() -> None:
    names = list(contracts.__all__)
    missing = [n for n in names if not hasattr(contracts, n)]
    assert not missing, f"contracts.__all__ names that do not exist: {missing}"
    assert len(names) == len(set(names)), "contracts.__all__ has duplicates"
    assert names == sorted(names, key=_isort_key), "contracts.__all__ is not sorted (RUF022)"
