"""What the CLI prints for people: cut text, error details, tables."""

from __future__ import annotations

import pytest

from contracts import JsonValue
from shim._render import console, error_lines, records, short


def test_short_cuts_on_one_line_with_an_ellipsis() -> None:
    assert short("a  b\nc") == "a b c"
    cut = short("word " * 30, 20)
    assert len(cut) <= 20 and cut.endswith("word…")
    assert short("abcdefghij" * 5, 20) == "abcdefghijabcdefghi…"  # no word to cut at
    assert short({"k": [1, 2]}) == '{"k": [1, 2]}'


def test_error_details_become_lines_to_act_on() -> None:
    assert error_lines({"known": ["echo", "model-plan"]}) == ["  known: echo, model-plan"]
    problems: JsonValue = {"errors": [{"path": "/plan_digest", "problem": "'x' does not match"}]}
    assert error_lines(problems) == ["  /plan_digest: 'x' does not match"]
    assert error_lines({"run_id": "run_1"}) == ["  run_id: run_1"]
    assert error_lines(None) == [] and error_lines("text") == []


def test_records_print_markup_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    table = records("T", ["objective"], [{"objective": "[bold]not markup[/bold] :smile:"}])
    console().print(table)
    assert "[bold]not markup[/bold] :smile:" in capsys.readouterr().out
