"""docs/reliability.md shows exactly the recorded figures (tests/chaos/results/*.json)."""

from __future__ import annotations

import json

from tests.chaos.report import DOC, END, RESULTS, START, TIERS, render
from tests.chaos.scenario import QUOTAS


def test_the_page_shows_the_recorded_figures() -> None:
    results = {
        t: json.loads((RESULTS / f"{t}.json").read_text(encoding="utf-8"))
        for t in TIERS
        if (RESULTS / f"{t}.json").exists()
    }
    text = DOC.read_text(encoding="utf-8")
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == render(results).strip(), "run: python -m tests.chaos.report"


def test_recorded_figures_meet_the_issue_quotas_and_passed() -> None:
    for tier in TIERS:
        path = RESULTS / f"{tier}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text(encoding="utf-8"))
        q = QUOTAS[tier]
        assert r["passed"] and r["failures"] == [], (tier, r["failures"][:5])
        assert r["runs"] >= q["runs"] and r["kills"]["total"] >= q["kills"], tier
        assert r["db_restarts"] >= q["db_restarts"], tier
        assert r["terminate_rounds"] >= q["terminate_rounds"], tier
