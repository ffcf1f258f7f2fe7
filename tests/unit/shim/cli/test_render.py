"""What the CLI prints for people: cut text, error details, tables."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from contracts import JsonValue, RunView
from contracts.budgets import BUDGET_KINDS, DEFAULT_BUDGETS
from shim.cli.render import console, error_lines, records, short
from shim.cli.run_card import run_card


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


def _view(**extra: JsonValue) -> RunView:
    step: dict[str, JsonValue] = {
        "step_id": "echo",
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "title": "say it",
        "input": {"n": 1},
    }
    body: dict[str, JsonValue] = {
        "run_id": "run_" + "1" * 32,
        "intent_id": "int_1",
        "recipe": "echo",
        "objective": "render me",
        "mode": "full-cycle",
        "status": "waiting_approval",
        "phase": "approval",
        "submitted_by": "alice",
        "policy_profile": "default",
        "tool_pool": "default",
        "plan_digest": "a" * 64,
        "error_code": None,
        "error_message": None,
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:01.000Z",
        "plan_card": {
            "plan": {"objective": "render me", "steps": [step]},
            "plan_digest": "a" * 64,
            "status": "waiting_input",
            "created_at": "2026-01-01T00:00:01.000Z",
        },
        "approvals": [],
        "steps": [],
        "links": {},
        **extra,
    }
    return RunView.model_validate(body)


def _printed(view: RunView, capsys: pytest.CaptureFixture[str]) -> str:
    for table in run_card(view):
        console().print(table)
    return capsys.readouterr().out


def test_a_narrow_terminal_wraps_the_digest_and_cuts_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns the digest cell once ended in an ellipsis: 4 of its 64 characters
    an approver compares were not on screen."""
    monkeypatch.setenv("COLUMNS", "70")
    out = _printed(_view(links={"approve": "/approve/run_1"}), capsys)
    assert "…" not in out, out
    assert "a" * 64 in "".join(out.split()), out  # wrapped onto the next line, all there
    assert "run_" + "1" * 32 in out


def test_the_plan_card_says_what_an_approver_needs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    links: dict[str, JsonValue] = {"links": {"approve": "/approve/run_1"}}
    out = _printed(_view(**links), capsys)
    for text in ("render me", "a" * 64, "none yet", "gatehouse approve run_", "say it", "not run"):
        assert text in out, text
    assert "waiting_input" not in out  # the card's own status is not the run's
    # a reader who may not decide (no approve link) is not told to approve
    assert "gatehouse approve" not in _printed(_view(), capsys)

    signer: dict[str, JsonValue] = {
        "subject": "CN=alice",
        "issuer": "CN=ca",
        "serial": "1",
        "fingerprint_sha256": "f" * 64,
        "not_before": "2026-01-01",
        "not_after": "2027-01-01",
        "trusted_by": "ca.pem",
    }
    opa: JsonValue = {
        "archive_name": "notes",
        "archive_sha256": "b" * 64,
        "opa_version": "0.1",
        "execution_mode": "batch",
        "signer": signer,
    }
    base = _view()
    assert base.plan_card is not None
    card: JsonValue = {
        **base.plan_card.model_dump(mode="json"),
        "revision": 2,
        "previous_digest": "c" * 64,
        "changes": [{"change": "added", "step_id": "echo", "step": {"n": 2}}],
    }
    out = _printed(_view(opa=opa, plan_card=card), capsys)
    assert "OPA archive notes (batch)" in out and "signed by CN=alice (ca.pem)" in out
    assert "Changes since the previous plan" in out and "c" * 64 in out and "added" in out


def test_records_never_cut_an_id_on_a_narrow_terminal() -> None:
    """As `gatehouse sql` prints them (limit 500): the prose column gives way."""
    run_id = "run_" + "e" * 32
    digest = "f" * 64
    rows: list[dict[str, JsonValue]] = [
        {"run_id": run_id, "digest": digest, "objective": "a long objective " * 6, "n": 1}
    ]
    out = io.StringIO()
    Console(file=out, width=120).print(
        records("1 row(s)", ["run_id", "digest", "objective", "n"], rows, limit=500)
    )
    text = out.getvalue()
    assert run_id in text and digest in text, text


def test_a_reader_who_cannot_approve_is_told_what_it_can_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A submitter's token gets no approve link: it is told who decides, and how to follow
    or withdraw the run meanwhile, never to run ``gatehouse approve``."""
    run = "run_" + "1" * 32
    links: dict[str, JsonValue] = {"links": {"self": f"/runs/{run}", "cancel": "/c"}}
    out = " ".join(_printed(_view(**links), capsys).split())
    assert "gatehouse approve" not in out
    assert "an approver's decision (this token cannot approve)" in out
    assert f"gatehouse runs watch {run}" in out and f"gatehouse cancel {run}" in out
    # an approver is told to approve, and nothing else
    approver = _printed(_view(links={"approve": "/a", "cancel": "/c"}), capsys)
    assert f"gatehouse approve {run}" in approver and "runs watch" not in approver
    # a decided or finished run suggests nothing
    decided: dict[str, JsonValue] = {
        "decision": "approved",
        "plan_digest": "a" * 64,
        "decided_by": "bob",
        "decided_at": "2026-01-01T00:00:02.000Z",
        "comment": None,
    }
    for done in (_view(approvals=[decided], status="running"), _view(status="cancelled")):
        out = _printed(done, capsys)
        assert "runs watch" not in out and "gatehouse approve" not in out


@pytest.mark.parametrize("columns", ["60", "80", "120", "200"])
def test_the_card_shows_every_budget_whole_at_any_width(
    columns: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budgets row was cut at 120 characters, before ``max_wall_s``, at 80 and 120
    columns alike: every budget, used and limit, is on the card, wrapped if need be."""
    monkeypatch.setenv("COLUMNS", columns)
    summary = {
        "max_cost_usd": "$12.3456 / $20.0000",
        "max_model_turns": "99 / 100",
        "max_steps": "199 / 200",
        "max_tokens": "1,999,999 / 2,000,000",
        "max_wall_s": "599.9 s / 600.0 s",
    }
    assert set(summary) == set(BUDGET_KINDS)
    limits = DEFAULT_BUDGETS.model_dump()
    budgets: dict[str, JsonValue] = {"limits": limits, "used": {}, "summary": dict(summary),
                                     "exceeded": "max_wall_s"}  # fmt: skip
    out = _printed(_view(budgets=budgets), capsys)
    row = out[out.index(" budgets ") : out.index("Plan card")]
    joined = " ".join(row.split())
    assert "…" not in row, out
    for kind, shown in summary.items():
        assert f"{kind} {shown}" in joined, out
    assert "(exceeded: max_wall_s)" in joined, out
