"""What approvers see: hidden and reordering characters escaped, values in full."""

from __future__ import annotations

import pytest

from contracts import JsonValue, canonical, visible


@pytest.mark.parametrize(
    "char",
    ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u200d", "\u200e",
     "\u061c", "\u2028", "\u2029", "\ufeff", "\u00ad", "\x1b", "\x7f", "\x85", "\u180e",
     "\ufe0f", "\u2060"],
)  # fmt: skip
def test_every_hidden_or_reordering_character_is_shown(char: str) -> None:
    shown = visible(f"rm a{char}; b")
    assert char not in shown
    assert f"\\u{ord(char):04x}" in shown


def test_ordinary_text_is_untouched_and_one_line_fields_stay_one_line() -> None:
    assert visible("Grüße, 東京 — ok") == "Grüße, 東京 — ok"
    assert visible("a\nb\tc") == "a\\nb\\tc"
    assert visible("a\nb", one_line=False) == "a\nb"


def test_canonical_is_complete_sorted_and_escaped() -> None:
    value: JsonValue = {"b": ["x" * 500, "y\u202ez"], "a": {"n": 1}}
    text = canonical(value, indent=None)
    assert text.index('"a"') < text.index('"b"')
    assert "x" * 500 in text  # nothing cut
    assert "\u202e" not in text and "y\\u202ez" in text


def test_a_step_fed_by_outside_data_is_marked_for_the_approver() -> None:
    from contracts import PlanStep, shown_input

    step = PlanStep.model_validate(
        {
            "step_id": "post",
            "verb": "write",
            "connector_id": "local-http",
            "driver_kind": "http",
            "input": {"url": "http://127.0.0.1:9/x", "method": "POST"},
            "input_from": {"step_id": "fetch", "pointer": "/items\u202e", "into": "/json"},
        }
    )
    shown = shown_input(step, True, indent=None)
    assert shown.startswith('{"method": "POST", "url": "http://127.0.0.1:9/x"}')
    assert "[OUTSIDE DATA (tainted): output of fetch/items\\u202e fills /json]" in shown
    plain = shown_input(step, False)
    assert "tainted" not in plain and "value from an earlier step" in plain
    assert step.input_from is not None
    source = step.input_from.model_copy(update={"into": None})
    whole = step.model_copy(update={"input": None, "input_from": source})
    assert (
        shown_input(whole, True)
        == "[OUTSIDE DATA (tainted): output of fetch/items\\u202e fills the whole input]"
    )
