"""The invariants every fault scenario ends on, and the negative control that
proves the checker could have failed.

Every scenario in ``tests/chaos`` (crashes, network faults, full disks,
overload, upgrades, clock jumps, the soak) drives runs through a
:class:`~tests.chaos.scenario.Scenario`, lets them settle, then calls
:func:`settle_and_check`:

* every accepted intent reached a terminal state (or the explicitly waiting
  one the scenario names),
* no effect was applied twice, none is lost, none ran that nobody approved,
* every interrupted call without an idempotency key was flagged in doubt,
* every run's hash chain verifies and every run replays with a match and no
  outbound call.

:func:`negative_control` then plants a loss, a duplicate and an effect nobody
approved in the sink's ground truth and takes the verdict again: the checker
must name exactly those, or the scenario fails. The truth is restored
afterwards, and the verdict must pass again.

:func:`record` prints the counts line (faults injected, runs, lost,
duplicated, unexpected, flagged, replayed) and writes the figures to
``var/chaos/<name>.json``, from which ``python -m tests.chaos.report`` renders
docs/reliability.md.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.chaos.client import say
from tests.chaos.model import Channel
from tests.chaos.scenario import Scenario
from tests.chaos.sink import UNKEYED_PATH

__all__ = [
    "RECORDED",
    "assert_held",
    "negative_control",
    "record",
    "results_dir",
    "settle_and_check",
]

# Every counts line ``record`` printed in this pytest process, in order: the
# chaos folder's conftest repeats them in the terminal summary, where they show
# even when pytest captured the scenario's own output (``mise run check``).
RECORDED: list[tuple[str, dict[str, int]]] = []


def results_dir() -> Path:
    return Path(os.environ.get("CHAOS_RESULTS_DIR", "var/chaos"))


def settle_and_check(scenario: Scenario, timeout_s: float) -> dict[str, Any]:
    """Wait for every submitted run to end, then check every invariant. Failures
    are collected in the scenario's figures (``results["failures"]``)."""
    scenario.settle(timeout_s)
    results = scenario.final_check()
    results["negative_control"] = negative_control(scenario)
    results["failures"] = list(scenario.figures.failures)
    return results


def negative_control(scenario: Scenario) -> dict[str, Any]:
    """Plant a loss, a duplicate and an unapproved effect; the checker must catch
    each (and nothing else), then pass again once the truth is restored."""
    sink = scenario.stack.sink
    _, applied = sink.snapshot()
    expected = {e.effect_id for e in scenario.book.expected() if e.channel is not Channel.NOTE}
    landed = sorted({a.effect_id for a in applied if a.effect_id in expected})
    before = scenario.verdict()
    out: dict[str, Any] = {"planted": 0, "caught": 0, "passed": False}
    if not before.passed or len(landed) < 2:
        out["skipped"] = (
            "the real verdict already failed" if not before.passed else "fewer than 2 effects"
        )
        scenario.figures.fail(f"negative control could not run: {out['skipped']}")
        return out
    lose, double = landed[0], landed[-1]
    stranger = "planted.nobody-approved"
    removed = sink.forget(lose)
    with httpx.Client(trust_env=False, timeout=10) as http:
        for effect_id in (double, stranger):
            r = http.post(sink.base_url + UNKEYED_PATH, json={"effect_id": effect_id})
            r.raise_for_status()
    out["planted"] = 3
    planted = scenario.verdict()
    caught = {
        "lost": planted.lost == [lose],
        "duplicated": planted.duplicated == [double],
        "unexpected": planted.unexpected == [stranger],
    }
    out["caught"] = sum(caught.values())
    for category, ok in caught.items():
        if not ok:
            scenario.figures.fail(
                f"negative control: a planted {category} effect was not caught exactly"
                f" (lost {planted.lost}, duplicated {planted.duplicated},"
                f" unexpected {planted.unexpected})"
            )
    # Restore the truth: the verdict must pass again.
    sink.remember(removed)
    sink.forget(double)
    sink.forget(stranger)
    after = scenario.verdict()
    out["passed"] = after.passed and out["caught"] == 3
    if not after.passed:
        scenario.figures.fail("negative control: the verdict did not pass once the truth was back")
    say(f"negative control: planted 3 (loss, duplicate, unapproved), caught {out['caught']}")
    return out


def record(name: str, results: dict[str, Any], faults: dict[str, int]) -> Path:
    """Print the counts line and write ``var/chaos/<name>.json``."""
    checker = results.get("checker", {})
    results["scenario"] = name
    results["faults"] = {**faults, "total": sum(faults.values())}
    results["recorded_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["cpus"] = os.cpu_count()
    results["counts"] = {
        "faults_injected": results["faults"]["total"],
        "runs": results.get("runs", 0),
        "lost": checker.get("lost", 0),
        "duplicated": checker.get("duplicated", 0),
        "unexpected": checker.get("unexpected", 0),
        "flagged": checker.get("flags", 0),
        "replayed": results.get("replay_matched", 0),
    }
    say(f"{name}: " + ", ".join(f"{k} {v}" for k, v in results["counts"].items()))
    RECORDED.append((name, dict(results["counts"])))
    out = results_dir() / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def assert_held(results: dict[str, Any]) -> None:
    """The invariants, as assertions (after ``record`` wrote the figures)."""
    assert results["failures"] == [], "\n".join(results["failures"][:40])
    checker = results["checker"]
    assert checker["lost"] == checker["duplicated"] == checker["unexpected"] == 0, checker
    assert checker["unflagged"] == checker["misresolved"] == 0, checker
    assert results["ledger_verified"] == results["runs"], results["ledger_verified"]
    assert results["replay_matched"] == results["runs"], results["replay_matched"]
    assert results["replay_outbound_calls"] == 0
    assert results["negative_control"]["passed"], results["negative_control"]
