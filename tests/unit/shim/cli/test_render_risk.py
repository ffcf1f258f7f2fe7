"""The CLI plan card's risk row: the steps by class as the shim judged them (``plan_risk`` in
the run's view, ``policies.risk.plan_risk`` with the run's own tool pool), whole at any width."""

from __future__ import annotations

import io

from contracts import JsonValue, Plan, RunView
from policies import catalog
from policies.risk import plan_risk
from shim.cli.render import console_to
from shim.cli.run_card import run_card

NOTE: dict[str, JsonValue] = {"step_id": "n", "verb": "note", "connector_id": "note",
                              "driver_kind": "noop", "input": {"text": "hi"}}  # fmt: skip
SHELL: dict[str, JsonValue] = {"step_id": "e", "verb": "run", "connector_id": "workspace-shell",
                               "driver_kind": "restricted_shell",
                               "input": {"argv": ["echo", "hi"]}}  # fmt: skip
POST: dict[str, JsonValue] = {"step_id": "p", "verb": "write", "connector_id": "local-http",
                              "driver_kind": "http",
                              "input": {"url": "http://127.0.0.1/x", "method": "POST"}}  # fmt: skip
UNKNOWN: dict[str, JsonValue] = {"step_id": "u", "verb": "read", "connector_id": "local-http",
                                 "driver_kind": "http", "input_from": {"step_id": "n"}}  # fmt: skip


def _view(steps: list[dict[str, JsonValue]], pool_digest: str | None) -> RunView:
    """A run's view as the shim answers it, its plan judged as the shim judges it."""
    plan: dict[str, JsonValue] = {"objective": "o", "steps": list[JsonValue](steps)}
    pool = catalog.tool_pool_if_here("default", pool_digest)
    judged = plan_risk(Plan.model_validate(plan), pool)
    return RunView.model_validate({
        "plan_risk": judged,
        "run_id": "run_" + "1" * 32, "intent_id": "int_1", "recipe": "echo", "objective": "o",
        "mode": "run-plan", "status": "waiting_approval", "phase": "approval",
        "submitted_by": "alice", "policy_profile": "default", "tool_pool": "default",
        "tool_pool_digest": pool_digest, "plan_digest": "a" * 64, "error_code": None,
        "error_message": None, "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:01.000Z",
        "plan_card": {"plan": plan, "plan_digest": "a" * 64, "status": "waiting_input",
                      "created_at": "2026-01-01T00:00:01.000Z"},
        "approvals": [], "steps": [], "links": {},
    })  # fmt: skip


def _risk_row(view: RunView, width: int) -> str:
    """The risk row's value, with the lines it wraps onto (their field cell blank)."""
    out = io.StringIO()
    shown = console_to(out, width)
    for table in run_card(view):
        shown.print(table)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(" risk "))
    value = [lines[start].removeprefix(" risk").strip()]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 6) or not line.strip():
            break
        value.append(line.strip())
    return " ".join(value)


def test_the_card_counts_the_steps_that_earn_a_warning() -> None:
    digest = catalog.tool_pool("default").digest  # the run's own pool, as this machine has it
    for width in (200, 120, 80):
        assert _risk_row(_view([NOTE, SHELL, POST], digest), width) == "change (2 steps)"
        assert _risk_row(_view([NOTE], digest), width) == "read only"
        # an address not known yet, every destination of the connector on loopback
        assert _risk_row(_view([NOTE, UNKNOWN], digest), width) == "change (1 step)"


def test_without_the_runs_own_pool_the_card_says_so() -> None:
    # another pool by that name here (a different digest): not the one the run pinned
    row = _risk_row(_view([NOTE, UNKNOWN], "b" * 64), 200)
    assert row == "outside world (1 step) (judged without the run's tool pool)"


def test_a_view_without_a_judged_risk_has_no_risk_row() -> None:
    """An answer from a shim that did not judge it (older than the row): no row."""
    view = _view([NOTE], None).model_copy(update={"plan_risk": None})
    out = io.StringIO()
    for table in run_card(view):
        console_to(out, 200).print(table)
    assert " risk " not in out.getvalue()
