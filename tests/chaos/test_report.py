"""docs/reliability.md shows exactly the recorded figures (tests/chaos/results/*.json)."""

from __future__ import annotations

import json

from tests.chaos.report import (
    DOC,
    END,
    RESULTS,
    SCENARIOS_END,
    SCENARIOS_START,
    SOAK_END,
    SOAK_START,
    START,
    TIERS,
    load_scenarios,
    render,
    render_scenarios,
    render_soak,
)
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


def test_the_fault_table_shows_the_recorded_scenarios() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = text.split(SCENARIOS_START, 1)[1].split(SCENARIOS_END, 1)[0].strip()
    assert block == render_scenarios(load_scenarios()).strip(), "run: python -m tests.chaos.report"
    soak = text.split(SOAK_START, 1)[1].split(SOAK_END, 1)[0].strip()
    assert soak == render_soak(load_scenarios()).strip(), "run: python -m tests.chaos.report"


def test_every_recorded_scenario_held_its_invariants() -> None:
    for name, r in load_scenarios().items():
        c = r["counts"]
        assert r["failures"] == [], (name, r["failures"][:5])
        assert c["lost"] == c["duplicated"] == c["unexpected"] == 0, (name, c)
        assert c["replayed"] == c["runs"] > 0, (name, c)
        assert r["negative_control"]["passed"], (name, r["negative_control"])


def test_the_counts_summary_has_a_line_per_recorded_scenario() -> None:
    from tests.chaos.conftest import summary_lines

    counts = {"faults_injected": 6, "runs": 15, "lost": 0, "duplicated": 1, "replayed": 15}
    lines = summary_lines([("network", counts), ("upgrade_new_version", {"runs": 11})])
    assert len(lines) == 3
    assert lines[0].split() == [
        "scenario",
        "faults",
        "runs",
        "lost",
        "duplicated",
        "unexpected",
        "flagged",
        "replayed",
    ]
    assert lines[1].split() == ["network", "6", "15", "0", "1", "0", "0", "15"]
    assert lines[2].split()[:3] == ["upgrade_new_version", "0", "11"]
    assert len({len(line) for line in lines}) == 1  # one width: the columns line up
