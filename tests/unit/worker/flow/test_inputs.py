"""Unit tests for worker.flow.resolve_input (RFC 6901 pointers into earlier outputs)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import ErrorCode, GatehouseError, JsonObject, PlanStep
from worker.flow import resolve_input

OUTPUTS: dict[str, JsonObject] = {
    "fetch": {
        "status": 200,
        "json": {
            "items": [{"name": "a", "size": 1}, {"name": "b", "size": 2}],
            "a/b": {"slash": True},
            "m~n": {"tilde": True},
            "~1": {"literal": "tilde-one"},
            "": {"empty": "key"},
            "7": {"digit": "key"},
        },
        "text": "hello",
        "list": [1, 2],
    },
    "empty": {},
}


def _from(source: str, pointer: str = "") -> PlanStep:
    body: dict[str, Any] = {
        "step_id": "next",
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input_from": {"step_id": source, "pointer": pointer},
    }
    return PlanStep.model_validate(body)


def _failure(step: PlanStep, outputs: dict[str, JsonObject] = OUTPUTS) -> GatehouseError:
    with pytest.raises(GatehouseError) as info:
        resolve_input(step, outputs)
    assert info.value.code is ErrorCode.INPUT_RESOLUTION_FAILED
    return info.value


def test_inline_input_is_returned_as_is() -> None:
    step = PlanStep.model_validate(
        {
            "step_id": "s",
            "verb": "note",
            "connector_id": "note",
            "driver_kind": "noop",
            "input": {"x": [1]},
        }
    )
    assert resolve_input(step, {}) == {"x": [1]}


def test_empty_pointer_is_the_whole_output() -> None:
    assert resolve_input(_from("fetch"), OUTPUTS) == OUTPUTS["fetch"]
    assert resolve_input(_from("empty"), OUTPUTS) == {}


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/json", OUTPUTS["fetch"]["json"]),
        ("/json/items/0", {"name": "a", "size": 1}),
        ("/json/items/1", {"name": "b", "size": 2}),
        ("/json/a~1b", {"slash": True}),
        ("/json/m~0n", {"tilde": True}),
        ("/json/~01", {"literal": "tilde-one"}),  # ~01 is "~1", not "/"
        ("/json/", {"empty": "key"}),
        ("/json/7", {"digit": "key"}),  # a digit token on an object is a key
    ],
)
def test_pointer_resolves(pointer: str, expected: JsonObject) -> None:
    assert resolve_input(_from("fetch", pointer), OUTPUTS) == expected


def test_missing_step() -> None:
    error = _failure(_from("never"))
    assert error.details == {"step_id": "next", "from": "never"}


@pytest.mark.parametrize(
    "pointer",
    [
        "/nope",
        "/json/items/2",
        "/json/items/-1",
        "/json/items/-",
        "/json/items/x",
        "/json/a/b",
        "/text/0",
        "/json/items/0/name/x",
        "/JSON",
    ],
)
def test_missing_pointer(pointer: str) -> None:
    error = _failure(_from("fetch", pointer))
    assert error.details == {"step_id": "next", "from": "fetch", "pointer": pointer}


@pytest.mark.parametrize(
    "pointer", ["/status", "/text", "/list", "/json/items", "/json/items/0/size"]
)
def test_pointer_to_a_non_object(pointer: str) -> None:
    error = _failure(_from("fetch", pointer))
    assert "not a JSON object" in error.message


def test_unicode_digit_index_is_a_resolution_failure_not_a_crash() -> None:
    _failure(_from("fetch", "/json/items/²"))


def test_leading_zero_index_is_refused() -> None:
    _failure(_from("fetch", "/json/items/01"))
