"""The approvals queue's order and filters (a plan that reaches outside first), the
labels every page shows instead of stored names, and text that wraps between words."""

from __future__ import annotations

import re
from pathlib import Path

import shim.api.dashboard
from contracts import BUDGET_KINDS, RunStatus, RunSummary
from policies.risk import Risk
from shim.api.dashboard import label
from shim.api.dashboard.approvals import LEFT, NEEDS, RISKS, SORTS, Row, kept, ordered


def _row(n: int, risk: Risk, left_s: float | None, approved: int = 0, needed: int = 1) -> Row:
    run = RunSummary.model_validate({
        "run_id": f"run_{n}", "recipe": "echo", "mode": "run-plan",
        "status": "waiting_approval", "phase": "approval",
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": f"2026-01-01T00:00:0{n}.000Z",
    })  # fmt: skip
    return Row(run, 1, risk, risk.value, None, left_s, needed, approved)


ROWS = [
    _row(1, Risk.READ, 60),
    _row(2, Risk.CHANGE, None),  # a wait whose expiry is not known: last among its class
    _row(3, Risk.OUTSIDE, 7200, approved=1, needed=2),
    _row(4, Risk.CHANGE, 600),
    _row(5, Risk.OUTSIDE, 90000),
]


def _ids(rows: list[Row]) -> list[int]:
    return [int(r.run.run_id.removeprefix("run_")) for r in rows]


def test_every_sort_orders_the_queue() -> None:
    assert set(SORTS) == {"risk", "left", "oldest"}
    assert _ids(ordered(ROWS, "risk")) == [3, 5, 4, 2, 1]
    assert _ids(ordered(ROWS, "left")) == [1, 4, 3, 5, 2]
    assert _ids(ordered(ROWS, "oldest")) == [1, 2, 3, 4, 5]


def test_every_filter_keeps_what_it_names() -> None:
    found = {
        (name, value): _ids([r for r in ROWS if kept(r, **{"risk": "", "left": "", "needs": ""}
                                                         | {name: value})])
        for name, values in (("risk", RISKS), ("left", LEFT), ("needs", NEEDS))
        for value in values
    }  # fmt: skip
    assert found == {
        ("risk", "read"): [1], ("risk", "change"): [2, 4], ("risk", "outside"): [3, 5],
        ("left", "1h"): [1, 4], ("left", "8h"): [1, 3, 4], ("left", "1d"): [1, 3, 4],
        ("left", "7d"): [1, 3, 4, 5],
        ("needs", "first"): [1, 2, 4, 5], ("needs", "more"): [3],
    }  # fmt: skip
    assert ROWS[2].needs == "1 of 2 approvers" and ROWS[0].needs == "an approver"
    assert ROWS[1].left == "not known" and ROWS[0].left == "1 min" and ROWS[0].soon
    assert ROWS[4].left == "1 d 1 h" and ROWS[2].left == "2 h 0 min" and not ROWS[2].soon


def test_no_stored_name_reaches_a_page_as_it_is_stored() -> None:
    """Every run status and budget kind a page shows is words: no underscore."""
    names = [s.value for s in RunStatus] + list(BUDGET_KINDS) + ["in_doubt", "started"]
    shown = {name: label(name) for name in names}
    assert [n for n, words in shown.items() if "_" in words] == []
    assert shown["waiting_approval"] == "waiting for approval"
    assert shown["max_cost_usd"] == "max cost (USD)"
    assert label(RunStatus.NEEDS_OPERATOR) == "needs an operator"


def test_text_wraps_between_words_not_inside_them() -> None:
    """``word-break: break-all`` cut every line of a step's input at whatever letter
    reached the edge; ``overflow-wrap: anywhere`` breaks only a word too long to fit."""
    css = (Path(shim.api.dashboard.__file__).parent / "static" / "style.css").read_text()
    assert not re.search(r"word-break\s*:\s*break-all", css)
    pre = re.search(r"code, pre \{[^}]*\}", css)
    assert pre is not None and "overflow-wrap: anywhere" in pre.group(0)
