"""What the CLI prints for people: cut text, error details, tables."""

from __future__ import annotations

import pytest

from contracts import JsonValue
from shim._cli_api import STALE_QUEUE_S, submit_warnings
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


def test_submit_warns_of_no_worker_and_of_a_full_one() -> None:
    no_worker: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": False, "reason": "no worker of version v"}},
        "queue": {"queued": 1, "oldest_queued_s": 0.1},
    }
    assert submit_warnings(False, no_worker) == ["no worker of version v"]
    live: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": True, "live": 1}},
        "queue": {"queued": 1},
    }
    assert submit_warnings(True, live) == []
    fresh: JsonValue = {**live, "queue": {"queued": 2, "oldest_queued_s": 1.5}}
    assert submit_warnings(True, fresh) == []
    stale: JsonValue = {**live, "queue": {"queued": 5, "oldest_queued_s": STALE_QUEUE_S + 1}}
    [warning] = submit_warnings(True, stale)
    assert warning.startswith("5 run(s) queued") and "GATEHOUSE_WORKER_CONCURRENCY" in warning
    assert submit_warnings(False, "not json") == []
