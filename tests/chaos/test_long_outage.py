"""A long database outage: PostgreSQL away for longer than any step's own retries
last, with calls in flight and a worker killed meanwhile. Its own file (apart from
the chaos suite's) so that pytest-xdist runs it beside the suite."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.chaos.client import say
from tests.chaos.harness import SLOTS, WORKER_ENV, running_stack
from tests.chaos.invariants import negative_control
from tests.chaos.scenario import SCALES, Scenario
from tests.support.pgcluster import unavailable_reason

LONG_OUTAGE_S = 20.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_long_database_outage_is_waited_out(tmp_path: Path) -> None:
    """PostgreSQL away for longer than any step's own retries last, with calls in
    flight and a worker killed (and started again) while it is away: every run
    still ends, nothing is lost, duplicated or unexpected."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the chaos suite: {reason}")
    # The sink answers slowly, so the outage finds calls between effect and completion.
    with running_stack(tmp_path, WORKER_ENV, sink_delay_s=1.0) as stack:
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES["ci"], seed=7)
        scenario.resolver.start()
        try:
            run_ids = []
            for _ in range(6):
                run_id = scenario.submit(scenario.plan(list(scenario.channels)))
                scenario.decide(run_id)
                run_ids.append(run_id)
            time.sleep(1.5)
            say(f"PostgreSQL stopped for {LONG_OUTAGE_S:.0f} s, a worker killed meanwhile")
            stack.pg.stop("immediate")
            scenario.faults.kill_random_worker(min_uptime_s=0)
            time.sleep(LONG_OUTAGE_S)
            stack.pg.start()
            left = scenario.wait_terminal(run_ids, 120)
        finally:
            scenario.resolver.stop()
        assert left == [], f"runs that never ended after the outage: {left}"
        results = scenario.final_check()
        control = negative_control(scenario)
    assert control["passed"], control
    assert stack.figures.failures == [], "\n".join(stack.figures.failures[:20])
    assert results["runs_by_status"] == {"succeeded": 6}, results["runs_by_status"]
    checker = results["checker"]
    assert checker["lost"] == checker["duplicated"] == checker["unexpected"] == 0, checker
