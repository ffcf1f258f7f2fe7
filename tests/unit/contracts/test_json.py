"""The one strict JSON reader (``contracts.strict_loads``) every boundary uses."""

from __future__ import annotations

import pytest

from contracts import strict_loads


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
