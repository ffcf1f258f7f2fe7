"""Clock jumps: every worker's and the shim's wall clock stepped forward and back mid-run.

All worker slots and the shim run on one libfaketime clock
(``tests.support.fakeclock``) the test steps +1 h, back, -1 h, +1 day and back
while runs are in flight; the monotonic clock is left alone, as a real NTP step
or a restored VM leaves it, and so is PostgreSQL's (another host's clock).
The sink holds every answer for a second, so steps land while http calls wait
on their step timeout (seconds, far below any step): a deadline computed on the
wall clock would fire at once on a forward step. While the clock is a day
ahead the last slot is killed for good: the reaper in a live worker must still
see that stall and hand its runs over. At every step the shim must still see
each running worker as live and answer ``/readyz`` ready: heartbeats are stamped
by the database's clock and aged by it, not by the reader's. Every run must then
succeed, every effect land once, every hash chain verify and every replay match.
"""

from __future__ import annotations

import time
from datetime import datetime
from itertools import groupby, pairwise
from pathlib import Path

import pytest

from tests.chaos.client import say
from tests.chaos.harness import SLOTS, WORKER_ENV, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.load import kill_for_good
from tests.chaos.scenario import SCALES, Scenario
from tests.support import fakeclock
from tests.support.pgcluster import unavailable_reason

HOUR, DAY = 3600, 86400
# (offset from the true wall clock, seconds held); a step back to 0 counts as "back".
OFFSETS = [+HOUR, 0, -HOUR, +DAY, 0, +HOUR, 0]
RUNS_PER_STEP = 3
HOLD_S = 2.5
KILL_AT = 3  # the index in OFFSETS (+1 day) at which the last slot is killed for good


def _load_last_slot(scenario: Scenario, rounds: int = 6) -> None:
    """Submit a run at a time until the slot to be killed for good holds one (the
    queue picks the worker), so its death leaves runs for the reaper to hand over."""
    for _ in range(rounds):
        if scenario.faults.pending_runs(SLOTS[-1]):
            return
        run_id = scenario.submit(scenario.plan(list(scenario.channels)))
        scenario.decide(run_id)
        time.sleep(0.8)


def _shim_misjudged(scenario: Scenario, offset: int) -> int:
    """Workers running (and past their first heartbeat: listed) that the shim, its
    clock ``offset`` s off, reports as not live; a refused readiness counts one more."""
    ready = scenario.api.call("GET", "/readyz", "operator")
    listed = scenario.api.json("GET", "/workers", "operator")["workers"]
    live = {w["executor_id"] for w in listed if w["live"]}
    running = {s.executor_id for s in scenario.stack.workers.live()}
    wrong = sorted((running & {w["executor_id"] for w in listed}) - live)
    ages = {w["executor_id"]: w["heartbeat_age_s"] for w in listed}
    if wrong or ready.status_code != 200:
        scenario.figures.fail(
            f"shim clock {offset:+d} s: /readyz {ready.status_code}, running {sorted(running)}"
            f" not live {wrong}; heartbeat ages {ages}"
        )
    return len(wrong) + int(ready.status_code != 200)


def _chain_vs_clock(scenario: Scenario) -> int:
    """Places where the chain-ordered ledger listing has a later call stamped
    earlier by the worker's wall clock: the steps, visible in the ledger."""
    inversions = 0
    for entry in scenario.book.all():
        calls = scenario.api.json("GET", f"/runs/{entry.run_id}/ledger", "operator")["calls"]
        stamps = [datetime.fromisoformat(c["started_at"].replace("Z", "+00:00")) for c in calls]
        inversions += sum(1 for a, b in pairwise(stamps) if b < a)
        tool_calls = [c for c in calls if c["kind"] == "tool"]
        # A call settled as not applied is tried again under the next attempt, so one
        # step may hold several calls: they must sit together, attempts climbing.
        tools = [step for step, _ in groupby(c["step_id"] for c in tool_calls)]
        order = [e.step_id for e in entry.planned.effects]
        listed = [(c["step_id"], c["attempt"]) for c in tool_calls]
        climbing = all(a < b for (s, a), (t, b) in pairwise(listed) if s == t)
        if tools != [s for s in order if s in tools] or not climbing:
            scenario.figures.fail(f"ledger of {entry.run_id} lists {listed}, the plan is {order}")
    return inversions


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_clock_jumps(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the chaos suite: {reason}")
    reason = fakeclock.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no steppable wall clock: {reason}")
    clock = fakeclock.FakeClock(tmp_path / "clock")
    forward = back = 0
    started = time.monotonic()
    misjudged = 0
    with running_stack(tmp_path, WORKER_ENV, sink_delay_s=1.0, shim_env=clock.env()) as stack:
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES["ci"], seed=18)
        scenario.resolver.start()
        try:
            for n, offset in enumerate(OFFSETS):
                for _ in range(RUNS_PER_STEP):
                    run_id = scenario.submit(scenario.plan(list(scenario.channels)))
                    scenario.decide(run_id)
                time.sleep(0.6)  # the first calls are at the sink, waiting for its answer
                if offset > clock.offset_s:
                    forward += 1
                else:
                    back += 1
                clock.set(offset)
                say(f"workers' and shim's wall clock now {offset:+d} s from the true one")
                if n == KILL_AT:
                    _load_last_slot(scenario)
                    kill_for_good(scenario)  # a real stall, judged while clocks are a day off
                time.sleep(HOLD_S)
                misjudged += _shim_misjudged(scenario, offset)
            clock.set(0)
            results = settle_and_check(scenario, 150)
            results["ledger_clock_inversions"] = _chain_vs_clock(scenario)
            results["shim_misjudged_workers"] = misjudged
            results["failures"] = list(scenario.figures.failures)
        finally:
            scenario.resolver.stop()
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["clock_offsets_s"] = OFFSETS
    say(
        f"clock: {forward} forward, {back} back; runs {results['runs']}"
        f" {results['runs_by_status']}; orphaned {results['orphaned_by_kill_for_good']},"
        f" adopted {results['adopted_from_killed_for_good']};"
        f" ledger stamps out of chain order {results['ledger_clock_inversions']};"
        f" workers the shim misjudged {misjudged}"
    )
    record("clock", results, {"forward": forward, "back": back, "kill_for_good": 1})
    assert_held(results)
    assert results["runs_by_status"] == {"succeeded": results["runs"]}, results["runs_by_status"]
    assert results["adopted_from_killed_for_good"] == results["orphaned_by_kill_for_good"]
