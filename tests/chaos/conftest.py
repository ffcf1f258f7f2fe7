"""The chaos folder's summary: each scenario's counts, after pytest's own report.

pytest shows a passing test's output only with ``-s``; the gate runs without it,
so the counts every scenario records (``invariants.record``) are repeated here,
one line a scenario, whether its test passed or failed.
"""

from __future__ import annotations

import pytest

from tests.chaos.invariants import RECORDED

COLUMNS = ("faults_injected", "runs", "lost", "duplicated", "unexpected", "flagged", "replayed")
HEADINGS = ("faults", "runs", "lost", "duplicated", "unexpected", "flagged", "replayed")


def summary_lines(recorded: list[tuple[str, dict[str, int]]]) -> list[str]:
    """A fixed-width table: a heading line, then one line per recorded scenario."""
    width = max([len("scenario"), *(len(name) for name, _ in recorded)])
    lines = ["scenario".ljust(width) + "".join(f"  {h:>10}" for h in HEADINGS)]
    for name, counts in recorded:
        cells = "".join(f"  {counts.get(c, 0):>10}" for c in COLUMNS)
        lines.append(name.ljust(width) + cells)
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RECORDED:
        return
    terminalreporter.write_sep("-", "chaos scenarios: counts (var/chaos/<scenario>.json)")
    for line in summary_lines(RECORDED):
        terminalreporter.write_line(line)
