"""What a person reads is what is sent: on every surface a person reads, no character
that draws nothing, draws something else, reorders the line or drives a terminal
reaches them raw, and no shortened cell ends inside an escape.

An http body ``{"amount": "10<two TAG characters>"}`` showed as ``"amount": "10"`` on
the run page and in ``gatehouse show``: tag characters, U+034F, the variation
selectors past the BMP, musical formatting and the Khmer inherent vowels reached
the page and the terminal raw, ``gatehouse runs`` printed U+200D raw, and a cell cut
at 120 columns could end half-way through an escape.

The class is built from ``unicodedata``, not from the code under test
(``tests/unit/hidden_class.py``). Each assigned member is fed to every surface, with a dense
sample of the unassigned, private-use and surrogate ranges (a full sweep of those
is in ``tests/unit/contracts/test_shown_as_is.py``): CLI tables and plan cards, the
explain report as the CLI prints it, the dashboard's pages, Slack's messages and
replies, and the notifications' Slack text and email.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import pytest

from contracts import (
    CallView,
    ErrorCode,
    ExplainView,
    GatehouseError,
    JsonObject,
    JsonValue,
    QuorumView,
    RunList,
    RunView,
    Sink,
    canonical,
    shown_input,
)
from ledger.slack_messages import Closing, SlackMessage, Why
from policies.risk import Risk
from policies.summary import summarize
from policies.taint import tainted
from shim.api import slack
from shim.api.dashboard import page
from shim.api.dashboard.approvals import Row, queue_context
from shim.cli.client import explain_text
from shim.cli.printable import PrintableStream
from shim.cli.render import console_to, fields, records, run_list, short
from shim.cli.run_card import run_card
from tests.unit.hidden_class import SAMPLE, in_class, raw
from worker.notify.payload import closing_line, email_message, slack_message, slack_update

# Lone surrogates cannot be encoded for the wire (JSON, HTTP, SMTP): a surface that
# receives text has received it as Unicode scalar values. The CLI's and Slack's text
# builders are fed them anyway.
SCALARS = [c for c in SAMPLE if not 0xD800 <= c <= 0xDFFF]
# Each member between two letters: "a<U+E0030>b" must not read "ab".
HOSTILE = "".join(f"a{chr(c)}" for c in SCALARS) + "b"
REPORTED = "10\U000e0030\U000e0030 ok\u200d \u034f\U000e0100\U0001d173\u17b4"
NO_NUL = HOSTILE.replace("\x00", "")  # explain's text refuses NUL outright
# What a plan's text may hold (2,000 characters): the class, a part at a time.
PARTS = [HOSTILE[i : i + 1900] for i in range(0, len(HOSTILE), 1900)]
TEXTS = pytest.mark.parametrize(
    "text", [*PARTS, REPORTED], ids=[*(f"class-{n}" for n in range(len(PARTS))), "reported"]
)
RUN = "run_" + "9" * 32
DIGEST = "a" * 64


def _texts(value: object) -> str:
    """Every string in a message (its keys too), as Slack would show them: not
    ``repr``, which escapes some of the class by itself."""
    if isinstance(value, str):
        return value + "\n"
    if isinstance(value, dict):
        return "".join(_texts(k) + _texts(v) for k, v in value.items())
    if isinstance(value, list):
        return "".join(_texts(v) for v in value)
    return ""


def test_the_sample_covers_the_reported_ranges() -> None:
    """The class as built here holds every range the report names."""
    for low, high in [
        (0xE0000, 0xE007F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x1D173, 0x1D17A),
        (0x17B4, 0x17B5), (0x034F, 0x034F), (0x200B, 0x200F), (0x202A, 0x202E),
        (0x2066, 0x2069), (0x0000, 0x001F), (0x007F, 0x009F), (0x2028, 0x2029),
    ]:  # fmt: skip
        assert all(in_class(c) for c in range(low, high + 1)), hex(low)
    assert {0xE0030, 0x034F, 0xE0100, 0x1D173, 0x17B4, 0x200D} <= set(SCALARS)
    assert len(SCALARS) > 2000  # every assigned member and the sparse sample


# --- the CLI: tables, the run card, what every line goes through ------------------


def _run_view(text: str) -> RunView:
    # A plan refuses NUL at the door (it cannot be stored): its text is the rest.
    planned = text.replace("\x00", "")
    step = {"step_id": "s1", "verb": "write", "driver_kind": "http", "connector_id": "web",
            "title": planned, "input": {"url": "http://127.0.0.1:9/x", "method": "POST",
                                       "json": {"amount": planned}}}  # fmt: skip
    return RunView.model_validate(
        {
            "run_id": RUN, "intent_id": "int_1", "recipe": "echo", "objective": text,
            "mode": "full-cycle", "status": "waiting_approval", "phase": "approval",
            "submitted_by": text, "policy_profile": "default", "tool_pool": "default",
            "plan_digest": DIGEST, "error_code": "step_failed", "error_message": text,
            "created_at": "2026-12-01T23:00:00+00:00", "updated_at": "t",
            "plan_card": {
                "plan": {"objective": planned, "steps": [step]}, "plan_digest": DIGEST,
                "status": "waiting_input", "created_at": "t",
                "changes": [{"change": "added", "step_id": "s1", "after": text}],
            },
            "approvals": [{"decision": "rejected", "decided_by": text, "plan_digest": DIGEST,
                           "decided_at": "t", "comment": text}],
            "steps": [{"step_id": "s1", "position": 0, "driver_kind": "http",
                       "connector_id": "web", "status": "failed", "error_code": "x",
                       "error_message": text, "output": {"stdout": text}, "op_key": DIGEST,
                       "finished_at": "t"}],
            "links": {},
        }
    )  # fmt: skip


def _printed(*tables: object, width: int) -> str:
    buffer = io.StringIO()
    out = console_to(buffer, width)
    for table in tables:
        out.print(table)
    return buffer.getvalue()


def _run_page(text: str) -> RunList:
    row = {"run_id": RUN, "recipe": "echo", "mode": "full-cycle", "status": "failed",
           "phase": "done", "created_at": "t", "updated_at": "t", "objective": text,
           "submitted_by": text, "error_code": "x"}  # fmt: skip
    return RunList.model_validate({"runs": [row]})


@TEXTS
@pytest.mark.parametrize("width", [80, 200])
def test_cli_tables_and_the_plan_card_show_no_hidden_character(text: str, width: int) -> None:
    view = _run_view(text)
    calls: list[dict[str, JsonValue]] = [{"step_id": text, "target": text, "status": "failed"}]
    out = _printed(
        *run_card(view),
        run_list(_run_page(text)),
        fields("answer", {"objective": text}),
        records("calls", ["step_id", "target", "status"], calls),
        width=width,
    )
    assert raw(out) == []
    assert "\\" in out  # shown as escapes, not dropped


def test_every_line_the_cli_writes_and_the_explain_report_show_no_hidden_character() -> None:
    report = {
        "headline": NO_NUL[:200],
        "summary": NO_NUL[:2000],
        "steps": [{"step_id": "s1", "note": NO_NUL[-2000:]}],
        "concerns": [REPORTED],
    }
    view = ExplainView.model_validate(
        {"run_id": RUN, "report": report, "report_digest": DIGEST, "op_key": DIGEST,
         "attempt": 1, "from_ledger": False, "request_digest": DIGEST,
         "evidence_digest": DIGEST, "model": NO_NUL[:40]}
    )  # fmt: skip
    written = io.StringIO()
    stream = PrintableStream(written)
    stream.write(explain_text(view) + "\n")
    stream.write(HOSTILE + "\n")
    assert raw(written.getvalue()) == []


# --- shortened cells hold whole escapes -----------------------------------------

# An escape as the surfaces spell one; any backslash in the output starts one, for
# no text fed here holds a backslash of its own.
_WHOLE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_ANY = re.compile(r"\\")


def _broken_escapes(out: str) -> list[str]:
    whole = {m.start() for m in _WHOLE.finditer(out)}
    return [out[m.start() : m.start() + 10] for m in _ANY.finditer(out) if m.start() not in whole]


def _escape_heavy() -> Iterator[str]:
    """Objectives made mostly of escapes of every length, at every offset."""
    kinds = ["\u200d", "\x1b", "\U000e0030", "\u034f", "\U000e0100", "\u2028"]
    for lead in range(12):
        yield "x" * lead + "".join(kinds) * 8
        yield "word " * lead + "".join(k * 3 for k in kinds)


@pytest.mark.parametrize("width", [80, 120])
def test_every_shortened_cell_holds_whole_escapes(width: int) -> None:
    for objective in _escape_heavy():
        out = _printed(
            run_list(_run_page(objective)),
            *run_card(_run_view(objective)),
            fields("answer", {"objective": objective}),
            records("runs", ["objective"], [{"objective": objective}], limit=40),
            width=width,
        )
        assert _broken_escapes(out) == [], objective
        assert raw(out) == []


def test_short_cuts_between_escapes_at_every_limit() -> None:
    for objective in _escape_heavy():
        for limit in range(2, 70):
            cut = short(objective, limit)
            assert len(cut) <= limit
            assert _broken_escapes(cut) == [], (objective, limit)
            assert raw(cut) == []


# --- the dashboard -------------------------------------------------------------


def _html(name: str, **context: object) -> str:
    who = {"name": HOSTILE, "roles": ["approver", "operator"]}
    response = page(name, who=who, csrf="c" * 32, flash=HOSTILE, **context)
    return bytes(response.body).decode("utf-8")


def _run_context(text: str) -> dict[str, object]:
    """What the run page is given (``shim.api.dashboard.run``), every text ``text``."""
    view = _run_view(text)
    card = view.plan_card
    assert card is not None
    outside = tainted(card.plan)
    call = CallView.model_validate(
        {"op_key": DIGEST, "run_id": RUN, "step_id": "s1", "attempt": 1, "kind": "tool",
         "target": text, "status": "failed", "request_digest": DIGEST, "response_digest": None,
         "error_code": text, "started_at": "t", "finished_at": None, "duration_ms": 3}
    )  # fmt: skip
    return {
        "view": view,
        "plan_inputs": [shown_input(s, s.step_id in outside) for s in card.plan.steps],
        "summary": summarize(card.plan, None),
        "reviews_outside_data": True,
        "card_state": text,
        "changes": [{"what": text, "step_id": text, "before": text, "after": canonical(text)}],
        "plan_json": canonical(card.plan.model_dump(mode="json")),
        "operator": True,
        "can_decide": True,
        "not_deciding": text,
        "can_replay": True,
        "outputs": {"s1": canonical({"stdout": text})},
        "can_cancel": True,
        "calls": [call],
        "durations": {"s1": text},
        "episodes": [{"episode_id": text, "episode_type": text, "step_id": text,
                      "result_status": text, "body_text": canonical({"t": text})}],
        "artifacts": [{"sha256": DIGEST, "name": text, "step_id": text, "size_bytes": 1,
                       "content_type": text}],
    }  # fmt: skip


@TEXTS
def test_dashboard_pages_show_no_hidden_character(text: str) -> None:
    summary = _run_page(text).runs
    event = {"recorded_at": "t", "result_details": {"repeat_count": 2, "last_seen_at": "t"},
             "security_event_type": text, "security_event_category": text, "severity": text,
             "result_summary": text, "text": text}  # fmt: skip
    pages = {
        "run": _html("run.html", **_run_context(text)),
        "body": _html("_run_body.html", **_run_context(text)),
        "runs": _html("runs.html", runs=summary, statuses=[text], status=text, recipe=text,
                      next_query=text),
        "approvals": _html("approvals.html", **queue_context(
            [Row(r, 2, Risk.CHANGE, text, text, 90.0, 2, 1) for r in summary], 3,
            {"sort": text, "risk": text, "left": text, "needs": text}, [])),
        "approvals-refused": _html("approvals.html", **queue_context(
            [], 0, {"sort": text}, [text])),
        "security": _html("security.html", events=[event]),
        "workers": _html("workers.html", workers=[{"name": text}], columns=["name", text]),
        "error": _html("error.html", status=400, code=text, message=text),
        "result": _html("result.html", heading=text, ok=False, verdict=text, report=text,
                        run_id=text),
        "login": _html("login.html", next=text, problem=text, issuer=text),
    }  # fmt: skip
    assert {name: raw(html) for name, html in pages.items()} == {key: [] for key in pages}
    assert "\\U000e0030" in pages["run"] or "\\udb40\\udc30" in pages["run"]


# --- Slack and the notifications ----------------------------------------------------


def _original(text: str) -> JsonObject:
    return {"text": text, "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": []},
    ]}  # fmt: skip


@TEXTS
def test_slack_replies_show_no_hidden_character(text: str) -> None:
    refusal = GatehouseError(ErrorCode.ALREADY_DECIDED, text)
    replies: dict[str, Any] = {
        "decided": slack.decided_message(_original(text), RUN, "approved", text, "U1"),
        "closed": slack.closed_message(_original(text), RUN, refusal),
        "refused": slack.refusal_message(refusal),
        "quorum": slack.short_of_quorum(QuorumView(needed=3, approved_by=[text, text])),
    }
    assert {k: raw(_texts(v)) for k, v in replies.items()} == {key: [] for key in replies}


def _notification(text: str) -> JsonObject:
    return {"delivery_id": "d1", "event": "waiting_approval", "run_id": RUN, "seq": 7,
            "at": "t", "recipe": text, "objective": text, "submitted_by": text,
            "plan_digest": DIGEST, "error_code": text, "expires_at": text,
            "links": {"dashboard": "http://h/dashboard/runs/x",
                      "api": "http://h/runs/x"}}  # fmt: skip


@TEXTS
def test_notifications_show_no_hidden_character(text: str) -> None:
    data = _notification(text)
    sink = Sink.model_validate({"id": "mail", "kind": "email",
                                "events": ["waiting_approval"], "smtp": {"host": "mx"},
                                "sender": "g@x", "to": ["a@x"]})  # fmt: skip
    posted = SlackMessage("desk", "C1", "1700000000.000100", RUN, DIGEST, 7, _original(text))
    whys: tuple[Why, ...] = ("approved", "rejected", "edited", "replaced", "cancelled", "ended")
    closings = [Closing(posted, why, text, "2026-12-01T23:00:00+00:00", text) for why in whys]
    mail = email_message(data, sink)
    shown = {
        "slack": _texts(slack_message(data, buttons=True)),
        "closing": " ".join(closing_line(c) for c in closings),
        "update": _texts(slack_update(closings[0], closing_line(closings[0]))),
        "subject": str(mail["Subject"]),
        "email": str(mail.get_content()),
    }
    assert {k: raw(v) for k, v in shown.items()} == {key: [] for key in shown}
