"""Text a submitter, a model or a tool controls never drives the operator's terminal.

An objective holding ``ESC ] 0;…BEL`` (set the window title), ``ESC [2J`` (clear the
screen), a carriage return or a right-to-left override was printed raw by
``gatehouse runs``. Every line the CLI writes now passes one filter: each control or
bidi character is shown as its escape. The same hostile strings go through a table,
a run card, an error's message and details, and ``watch``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from shim.cli import main
from shim.cli.render import printable

RUN = "run_" + "9" * 32
HOSTILE = [
    "\x1b]0;pwned\x07",  # set the terminal's title
    "\x1b[2J",  # clear the screen
    "ok\rFAKE",  # overwrite the line
    "\u202egnp.exe",  # shown backwards
    "\x9b31m",  # a C1 control sequence introducer
]
TEXT = " ".join(HOSTILE)
Answer = Callable[[Callable[[httpx.Request], httpx.Response]], None]


def _run_view(**extra: Any) -> dict[str, Any]:
    step = {"step_id": "s1", "verb": "note", "driver_kind": "noop", "connector_id": "noop"}
    return {
        "run_id": RUN,
        "intent_id": "int_1",
        "recipe": "echo",
        "objective": TEXT,
        "mode": "full-cycle",
        "status": "failed",
        "phase": "done",
        "submitted_by": TEXT,
        "policy_profile": "default",
        "tool_pool": "default",
        "plan_digest": "a" * 64,
        "error_code": "step_failed",
        "error_message": TEXT,
        "created_at": "t",
        "updated_at": "t",
        "plan_card": {
            "plan": {"objective": TEXT, "steps": [{**step, "title": TEXT, "input": {"x": TEXT}}]},
            "plan_digest": "a" * 64,
            "status": "approved",
            "created_at": "t",
        },
        "approvals": [],
        "steps": [],
        "links": {},
        **extra,
    }


def _shim(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/runs":
        summary = {"run_id": RUN, "recipe": "echo", "mode": "full-cycle", "status": "failed"}
        row = {**summary, "phase": "done", "created_at": "t", "updated_at": "t"}
        return httpx.Response(
            200, json={"runs": [{**row, "objective": TEXT, "submitted_by": TEXT}]}
        )
    if path == f"/runs/{RUN}":
        return httpx.Response(200, json=_run_view())
    if path == f"/runs/{RUN}/events":
        events = [
            {"kind": "step.started", "body": {"step_id": TEXT, "attempt": 1}},
            {"kind": "run.phase", "body": {"status": "failed", "phase": TEXT}},
        ]
        lines = [
            f"id: {seq}\nevent: {e['kind']}\ndata: "
            + json.dumps({"run_id": RUN, "seq": seq, "at": TEXT, **e})
            + "\n\n"
            for seq, e in enumerate(events, 1)
        ]
        lines.append("event: end\ndata: {}\n\n")  # the run is over: the stream ends
        return httpx.Response(
            200, text="".join(lines), headers={"content-type": "text/event-stream"}
        )
    details = {"errors": [{"path": "/x", "problem": TEXT}], "known": [TEXT]}
    body = {"error": {"code": "invalid_request", "message": TEXT, "details": details}}
    return httpx.Response(422, json=body)


def _clean(out: str) -> None:
    for hostile in HOSTILE:
        assert hostile not in out
    for ch in out:
        assert ch in "\n\t" or (ord(ch) >= 0x20 and not 0x7F <= ord(ch) < 0xA0), repr(ch)
        assert ch not in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", repr(ch)


@pytest.mark.parametrize(
    "argv",
    [
        ["runs"],
        ["show", RUN],
        ["runs", "watch", RUN],
        ["submit", "--recipe", "echo", "--objective", "x"],  # the error's message and details
    ],
)
def test_no_command_prints_a_control_character(
    argv: list[str], answered_by: Answer, capsys: pytest.CaptureFixture[str]
) -> None:
    answered_by(_shim)
    with pytest.raises(SystemExit):
        main([*argv, "--url", "http://shim", "--token", "gh_x"])
    out = capsys.readouterr()
    _clean(out.out)
    _clean(out.err)
    assert "\\x1b" in out.out + out.err  # shown, as its escape


def test_printable_shows_each_character_as_its_escape() -> None:
    assert printable("\x1b[2J") == "\\x1b[2J"
    assert printable("a\rb") == "a\\x0db"
    assert printable("\u202eabc") == "\\u202eabc"
    assert printable("line\n\tnext é 中") == "line\n\tnext é 中"
