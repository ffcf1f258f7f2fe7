"""The soak under ``gatehouse up --workers 3``: many runs, a worker killed every
few minutes, the processes and the database sampled all along.

Short by default (the ``check`` gate); ``npx -y @jdxcode/mise run soak`` runs the
long form (10,000 runs over an hour). The figures go to
``var/chaos/soak-<runs>.json`` and ``python -m tests.chaos.report`` puts the long
form's into docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.invariants import assert_held, record
from tests.chaos.soak import run_soak, soak_size
from tests.support.pgcluster import unavailable_reason


@pytest.mark.slow
@pytest.mark.timeout(int(float(os.environ.get("SOAK_MINUTES", "1")) * 60 * 2.5) + 600)
def test_soak(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the soak: {reason}")
    size = soak_size()
    results = run_soak(tmp_path, size, seed=int(os.environ.get("RANDOM_SEED", "20241124")))
    soak = results["soak"]
    name = "soak-long" if size.runs >= 1000 else "soak-short"
    record(name, results, {"worker_kills": soak["worker_kills"]})
    assert_held(results)
    assert results["runs"] == size.runs, results["runs"]
    assert soak["worker_kills"] >= 2, soak["worker_kills"]
    curves = soak["curves"]
    # Bounded, not growing with the runs: database sessions stay within the pools
    # (3 workers and the shim), open files end where they began, give or take.
    assert curves["db_connections_max"] <= 120, curves["db_connections"]
    assert curves["workers_open_files_last_quarter_median"] <= (
        curves["workers_open_files_first_quarter_median"] + 60
    ), curves["workers_open_files"]
    assert curves["shim_open_files_last_quarter_median"] <= (
        curves["shim_open_files_first_quarter_median"] + 30
    ), curves["shim_open_files"]
