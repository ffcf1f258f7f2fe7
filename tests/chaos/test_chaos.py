"""The chaos suite: kill -9, crash points, a slot killed for good, PostgreSQL
crash-restarts and terminated sessions, under load — and nothing lost,
duplicated or unexpected.

``CHAOS_SCALE=ci`` (the default) or ``soak`` picks the tier. The figures go to
``var/chaos/<tier>.json`` (``CHAOS_RESULTS_DIR`` moves them);
``python -m tests.chaos.report`` turns them into docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.client import say
from tests.chaos.harness import SLOTS, WORKER_ENV, running_stack
from tests.chaos.invariants import assert_held, negative_control, record
from tests.chaos.scenario import QUOTAS, SCALES, Scenario
from tests.support.pgcluster import unavailable_reason


def _scale_name() -> str:
    name = os.environ.get("CHAOS_SCALE", "ci")
    if name not in SCALES:
        raise pytest.UsageError(f"CHAOS_SCALE must be one of {sorted(SCALES)}, not {name!r}")
    return name


@pytest.mark.slow
@pytest.mark.timeout(7200 if os.environ.get("CHAOS_SCALE") == "soak" else 900)
def test_chaos_suite(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the chaos suite: {reason}")
    name = _scale_name()
    seed = int(os.environ.get("RANDOM_SEED", "20240604"))
    say(f"tier {name}, seed {seed}, logs in {tmp_path}")
    # The sink holds each answer a moment, so kills land while calls are in flight.
    with running_stack(tmp_path, WORKER_ENV, sink_delay_s=0.15) as stack:
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES[name], seed)
        results = scenario.run()
        results["negative_control"] = negative_control(scenario)
        results["failures"] = list(stack.figures.failures)
    kills = results["kills"]
    faults = {
        "kill_random": kills["random"],
        "kill_at_crash_point": kills["crash_point"],
        "kill_for_good": kills["for_good"],
        "db_restarts": results["db_restarts"],
        "terminate_rounds": results["terminate_rounds"],
    }
    say(f"figures written to {record(name, results, faults)}")
    assert_held(results)
    cases = results["crash_cases"]
    assert cases["passed"] == cases["total"], cases
    assert (cases["total"] > 0) == (SCALES[name].crash_matrix_repeats > 0), cases
    quota = QUOTAS[name]
    assert results["runs"] >= quota["runs"], results["runs"]
    assert results["kills"]["total"] >= quota["kills"], results["kills"]
    assert results["db_restarts"] >= quota["db_restarts"], results["db_restarts"]
    assert results["terminate_rounds"] >= quota["terminate_rounds"], results["terminate_rounds"]
