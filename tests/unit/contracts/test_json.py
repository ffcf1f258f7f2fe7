"""The one strict JSON reader (``contracts.strict_loads``) every boundary uses."""

from __future__ import annotations

import pytest

from contracts import PLACEHOLDER_KEY, strict_loads, with_placeholders


@pytest.mark.parametrize(
    "text",
    ["NaN", "[Infinity]", '{"x": -Infinity}', "1e999", "[-1e999]", '{"n": ' + "9" * 401 + ".0}"],
)
def test_what_no_json_encoder_could_write_back_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        strict_loads(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5e308", 1.5e308),
        ("-0.0", -0.0),
        ("1e-999", 0.0),  # underflow is a finite number
        ("12345678901234567890123", 12345678901234567890123),  # integers stay exact
        ('{"a": [1, "b", null, true]}', {"a": [1, "b", None, True]}),
    ],
)
def test_finite_json_reads_as_usual(text: str, value: object) -> None:
    assert strict_loads(text) == value
    assert strict_loads(text.encode()) == value


def test_bad_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        strict_loads(b"\xff")
    with pytest.raises(ValueError):
        strict_loads("{")


def test_a_number_no_json_can_carry_is_answered_as_a_marked_placeholder() -> None:
    stored = {"a": [1.5, float("inf")], "b": {"c": float("-inf"), "d": float("nan")}, "e": "x"}
    shown, count = with_placeholders(stored)
    assert count == 3
    assert shown == {
        "a": [1.5, {PLACEHOLDER_KEY: "non-finite number", "stored": "Infinity"}],
        "b": {
            "c": {PLACEHOLDER_KEY: "non-finite number", "stored": "-Infinity"},
            "d": {PLACEHOLDER_KEY: "non-finite number", "stored": "NaN"},
        },
        "e": "x",
    }
    finite = {"a": [1, 2.5, None, True, "s"]}
    assert with_placeholders(finite) == (finite, 0)
    assert with_placeholders(finite)[0] is finite


def test_the_apis_answer_never_fails_on_a_stored_infinity() -> None:
    from shim.api.http import PLACEHOLDERS_HEADER, Answer

    answer = Answer({"run": {"x": float("inf"), "y": 2}})
    assert answer.status_code == 200
    assert answer.headers[PLACEHOLDERS_HEADER] == "1"
    assert b'"gatehouse:placeholder":"non-finite number"' in answer.body
    assert PLACEHOLDERS_HEADER not in Answer({"y": 2}).headers
