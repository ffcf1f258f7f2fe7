"""Issue 18: an upgrade with runs in flight.

Runs are started on the old release, some waiting for approval and some mid-plan
(the sink answers slowly); every worker is stopped, one of them by kill -9 in
the middle of its calls, the shim too. The next release is deployed: its
migration is applied with ``gatehouse migrate`` and its shim and workers start
(tests.support.next_release: this code, as a copy with one more migration).
The waiting runs are approved, a few new runs submitted, and every run must end
under the versioning rule of docs/reliability.md ("Upgrades with runs in
flight"), nothing lost, duplicated or unexpected:

* same version — the flow did not change, the release keeps
  ``GATEHOUSE_APP_VERSION``: the new workers, under the old executor ids, resume
  every run themselves;
* new version — the release bumps it: new runs, and runs parked at a decision
  once decided, go to the new workers only; the stretches in flight at the stop
  are listed as unserved (readiness, ``GET /workers``) until old workers are
  started again, which drain them (the killed one's runs handed over by their
  reaper) and are stopped once their version has nothing left.

``test_runs_of_an_earlier_release_finish_under_this_one`` does the same from the
last commit of each earlier application version to this one: gatehouse-5 (another
flow: its calls were DBOS steps) and gatehouse-6 (its parked runs have no
continuation; its stretch jobs none either).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contracts import APP_VERSION
from shim.local import ASGI_APP, HTTP_PROTOCOL, start_shim, stop, wait_healthy
from tests.chaos.client import say
from tests.chaos.crashpoints import wait_until
from tests.chaos.harness import DB_NAME, SLOTS, WORKER_ENV, Stack, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.model import Channel
from tests.chaos.scenario import SCALES, Scenario
from tests.support.next_release import NextRelease, build_next_release
from tests.support.old_release import LAST_OF_GATEHOUSE_5, LAST_OF_GATEHOUSE_6, old_release
from tests.support.pgcluster import unavailable_reason
from tests.support.stack import GENEROUS_LIMITS

NEXT_VERSION = "gatehouse-next"
# Each earlier application version, by the last commit of it
EARLIER = {"gatehouse-5": LAST_OF_GATEHOUSE_5, "gatehouse-6": LAST_OF_GATEHOUSE_6}
SINK_DELAY_S = 0.8
WAITING = 4  # runs left waiting for approval across the upgrade
MOVING = 5  # runs approved at once, mid-plan when the workers stop
AFTER = 2  # runs submitted once the next release is up
SETTLE_S = 120.0


def _versions(stack: Stack) -> dict[str, dict[str, Any]]:
    raw = stack.api.json("GET", "/workers", "operator")
    return {str(v["app_version"]): v for v in raw["versions"]}


def _run_versions(stack: Stack, run_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Per run: (application version, executor id) as DBOS last recorded them, for the
    run's latest stretch (RUN_ID, or RUN_ID:N after its Nth decision)."""
    rows = stack.pg.query(
        DB_NAME,
        "SELECT workflow_uuid, application_version, executor_id FROM dbos.workflow_status"
        " ORDER BY created_at",
    )
    found = {str(r[0]).split(":")[0]: (str(r[1]), str(r[2])) for r in rows}
    return {run_id: found[run_id] for run_id in run_ids}


def _start(stack: Stack, ids: list[str], env: dict[str, str]) -> None:
    for executor_id in ids:
        stack.workers.start(executor_id, extra_env=env)
    stack.workers.wait_ready(ids)


def _shim_from(stack: Stack, tree: Path | None, log: str, app: str = ASGI_APP) -> None:
    """Replace the shim with one served from ``tree`` (another release, its ASGI
    application ``app``; None: this one), on the same port, with the same tokens."""
    stop([stack.shim])
    port = int(stack.api.base_url.rsplit(":", 1)[1])
    shim = start_shim(
        stack.database_url,
        port,
        stack.root / log,
        stack.root / "tokens.json",
        extra_env=dict(GENEROUS_LIMITS),
        cwd=tree,
        app=app,
        # an older release's tree has no protocol module of this one's
        protocol="h11" if tree is not None else HTTP_PROTOCOL,
    )
    wait_healthy(stack.api.base_url, shim)
    stack.shim = shim


def _deploy(stack: Stack, release: NextRelease, app_version: str) -> subprocess.Popen[bytes]:
    """Stop the old shim, apply the next release's migration, start its shim on the same port."""
    stop([stack.shim])
    done = release.cli("migrate", env={"GATEHOUSE_DATABASE_URL": stack.database_url})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{release.migration}" in done.stdout, done.stdout
    applied = stack.pg.query(DB_NAME, "SELECT MAX(version) FROM gatehouse.schema_migrations")
    assert applied[0][0] == release.migration
    port = int(stack.api.base_url.rsplit(":", 1)[1])
    shim = start_shim(
        stack.database_url,
        port,
        stack.root / "shim-next.log",
        stack.root / "tokens.json",
        extra_env={**GENEROUS_LIMITS, "GATEHOUSE_APP_VERSION": app_version},
        cwd=release.tree,
    )
    wait_healthy(stack.api.base_url, shim)
    stack.shim = shim
    return shim


@dataclass(frozen=True)
class InFlight:
    """Runs an old release left in flight when every worker stopped."""

    waiting: list[str]  # waiting for approval
    moving: list[str]  # approved before the stop
    mid_plan: list[str]  # of those, running when it came
    victim: str  # the worker killed with kill -9
    held: int  # how many runs the victim held


def _in_flight_then_stopped(
    stack: Stack, scenario: Scenario, faults: dict[str, int], why: str
) -> InFlight:
    """Runs waiting for approval and runs mid-plan (the sink answers slowly); then every
    worker stops: the one holding the most runs by kill -9 in its calls, the rest
    gracefully."""
    waiting = [
        scenario.submit(scenario.plan([Channel.KEYED, Channel.SHELL, Channel.UNKEYED]))
        for _ in range(WAITING)
    ]
    moving = []
    for _ in range(MOVING):
        run_id = scenario.submit(
            scenario.plan([Channel.KEYED, Channel.UNKEYED, Channel.KEYED, Channel.NOTE])
        )
        scenario.decide(run_id)
        moving.append(run_id)
    wait_until(
        lambda: all(scenario.status(r) == "waiting_approval" for r in waiting),
        60,
        "the runs to wait for approval",
    )
    wait_until(
        lambda: sum(scenario.status(r) == "running" for r in moving) >= 2, 30, "runs mid-plan"
    )
    holding = {s: scenario.faults.pending_runs(s) for s in SLOTS}
    victim = max(SLOTS, key=lambda s: len(set(holding[s]) & set(moving)))
    mid_plan = [r for r in moving if scenario.status(r) == "running"]
    stack.workers.slots[victim].hold = True  # not restarted by the harness
    assert stack.workers.kill(victim, why)
    faults["kill_9_mid_call"] += 1
    for executor_id in SLOTS:
        if executor_id != victim:
            stack.workers.pause(executor_id)
            faults["graceful_worker_stops"] += 1
    say(
        f"every worker stopped ({victim} by kill -9, holding {len(holding[victim])}"
        f" run(s)); {len(mid_plan)} run(s) mid-plan, {len(waiting)} waiting"
    )
    return InFlight(waiting, moving, mid_plan, victim, len(holding[victim]))


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("rule", ["same_version", "new_version"])
def test_upgrade_with_runs_in_flight(tmp_path: Path, rule: str) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the upgrade test: {reason}")
    faults = {"graceful_worker_stops": 0, "kill_9_mid_call": 0, "shim_restarts": 0}
    with running_stack(tmp_path, WORKER_ENV, sink_delay_s=SINK_DELAY_S) as stack:
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES["ci"], seed=18)
        scenario.resolver.start()
        shim: subprocess.Popen[bytes] | None = None
        try:
            # 1. The old release: runs waiting and mid-plan; 2. every worker stopped.
            stopped = _in_flight_then_stopped(stack, scenario, faults, "upgrade")
            waiting, moving, mid_plan = stopped.waiting, stopped.moving, stopped.mid_plan
            victim = stopped.victim
            # 3. Deploy the next release: migration, shim, workers.
            release = build_next_release(tmp_path)
            new_version = APP_VERSION if rule == "same_version" else NEXT_VERSION
            shim = _deploy(stack, release, new_version)
            faults["shim_restarts"] += 1
            new_env = {**release.worker_env(), "GATEHOUSE_APP_VERSION": new_version}
            if rule == "same_version":
                # The flow is unchanged: the next release's workers resume every run,
                # each under the executor id that held it (the killed one's too).
                stack.workers.env = {**WORKER_ENV, **new_env}
                _start(stack, list(SLOTS), {})
                old_workers: list[str] = []
            else:
                _start(stack, ["n1", "n2"], new_env)
                # Nothing is abandoned unseen: the old version's runs are listed, unserved
                # once its workers' last heartbeats are older than dead-after (until then
                # they count as live: a stop and a short pause look the same).
                dead_after_s = float(stack.api.json("GET", "/workers", "operator")["dead_after_s"])
                wait_until(
                    lambda: _versions(stack)[APP_VERSION]["served"] is False,
                    dead_after_s + 15,
                    "the old version to show as unserved",
                )
                old = _versions(stack)[APP_VERSION]
                # the runs mid-plan hold workflows; those waiting for approval are rows
                # only: once decided, their next stretch runs under the new version
                assert old["pending"] + old["enqueued"] >= len(mid_plan), old
                assert all(scenario.faults.parked(r) for r in waiting), waiting
                ready = stack.api.json("GET", "/readyz", "operator")
                assert any(APP_VERSION in str(w) for w in ready["warnings"]), ready
                say(f"before the old workers start: {old}")
                # Keep old workers until drained: the old release, under two of its
                # executor ids; the killed one's runs are handed over by their reaper.
                old_workers = [s for s in SLOTS if s != victim]
                _start(stack, old_workers, {})
            for run_id in waiting:
                scenario.decide(run_id)
            after = []
            for _ in range(AFTER):
                run_id = scenario.submit(scenario.plan([Channel.KEYED, Channel.SHELL]))
                scenario.decide(run_id)
                after.append(run_id)
            # 4. Every run ends; the invariants hold.
            results = settle_and_check(scenario, SETTLE_S)
            # What an operator reads before stopping the old workers: nothing left.
            versions = _versions(stack)
            for executor_id in old_workers:
                stack.workers.pause(executor_id)
        finally:
            scenario.resolver.stop()
            if shim is not None:
                stop([shim])
        old_runs = _run_versions(stack, waiting + moving)
        new_runs = _run_versions(stack, after)
    results["upgrade"] = {
        "rule": rule,
        "from_version": APP_VERSION,
        "to_version": new_version,
        "migration": release.migration,
        "waiting_for_approval": len(waiting),
        "mid_plan_at_stop": len(mid_plan),
        "approved_before_stop": len(moving),
        "submitted_after": len(after),
        "killed_worker_held": stopped.held,
        "old_runs_by_version": sorted({v for v, _ in old_runs.values()}),
        "new_runs_by_version": sorted({v for v, _ in new_runs.values()}),
        "old_runs_ended_on": sorted({e for _, e in old_runs.values()}),
        "versions_at_end": versions,
    }
    record(f"upgrade_{rule}", results, faults)
    say(f"upgrade ({rule}): {results['upgrade']}")
    assert_held(results)
    assert results["runs_by_status"] == {"succeeded": WAITING + MOVING + AFTER}, results
    # A run parked at its decision resumed under the release that took the decision; a
    # stretch in flight at the stop stayed on its version and ended on a worker of it
    # (or, one that parked again in needs_operator, resumed under the new release).
    assert {old_runs[r][0] for r in waiting} == {new_version}, old_runs
    assert {old_runs[r][0] for r in moving} <= {APP_VERSION, new_version}, old_runs
    assert {v for v, _ in new_runs.values()} == {new_version}, new_runs
    if rule == "new_version":
        on_new = {"n1", "n2"}
        assert {old_runs[r][1] for r in waiting} <= on_new, old_runs
        for version, executor_id in (old_runs[r] for r in moving):
            assert executor_id in (set(old_workers) if version == APP_VERSION else on_new)
        assert {e for _, e in new_runs.values()} <= on_new, new_runs
        drained = versions[APP_VERSION]
        assert drained["pending"] == drained["enqueued"] == 0, drained


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("old_version", list(EARLIER))
def test_runs_of_an_earlier_release_finish_under_this_one(tmp_path: Path, old_version: str) -> None:
    """Issue 47. From gatehouse-5: this release makes no DBOS step of a ledgered call,
    so it cannot resume a workflow of gatehouse-5, whose calls were steps. From
    gatehouse-6: its stretch jobs carry the run's continuation, which gatehouse-6's
    workers cannot read, and the runs gatehouse-6 parked have none. Runs the last
    release of the earlier version left waiting for approval and mid-plan (one worker
    killed in the middle of its calls, an unkeyed call in doubt, resolved by the
    operator) are taken over: this release's shim and workers start, and the old
    version's workers beside them only for the stretches that were in flight. A run
    parked at its decision holds no workflow: approved after the upgrade, its next
    stretch runs under this release, from its ledger. Every run ends once, each call
    once, and each replays under this release."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the upgrade test: {reason}")
    old = old_release(tmp_path, EARLIER[old_version])
    faults = {"graceful_worker_stops": 0, "kill_9_mid_call": 0}
    with running_stack(tmp_path, WORKER_ENV, sink_delay_s=SINK_DELAY_S) as stack:
        # The old release whole: its shim and workers, under its version.
        _shim_from(stack, old.tree, "shim-old.log")
        stack.workers.env = {**WORKER_ENV, **old.worker_env()}
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES["ci"], seed=47)
        scenario.resolver.start()
        try:
            stopped = _in_flight_then_stopped(stack, scenario, faults, "earlier release")
            waiting, moving, victim = stopped.waiting, stopped.moving, stopped.victim
            assert all(scenario.faults.parked(r) for r in waiting), waiting
            # This release: its shim, its workers under new ids; the old version's workers
            # (the old ids but the killed one's, whose runs their reaper hands over).
            _shim_from(stack, None, "shim-new.log")
            stack.workers.env = dict(WORKER_ENV)
            _start(stack, ["n1", "n2"], {})
            old_workers = [s for s in SLOTS if s != victim]
            _start(stack, old_workers, old.worker_env())
            for run_id in waiting:
                scenario.decide(run_id)
            results = settle_and_check(scenario, SETTLE_S)
            for run_id in waiting + moving:
                replayed = stack.api.json("POST", f"/runs/{run_id}/replay", "operator")
                assert replayed["match"] is True, (run_id, replayed)
        finally:
            scenario.resolver.stop()
        ran = _run_versions(stack, waiting + moving)
    results["earlier_release"] = {
        "from_version": old_version,
        "from_commit": old.commit,
        "waiting_for_approval": len(waiting),
        "approved_before_stop": len(moving),
        "mid_plan_at_stop": len(stopped.mid_plan),
        "killed_worker_held": stopped.held,
        "waiting_ran_under": sorted({ran[r][0] for r in waiting}),
        "moving_ran_under": sorted({ran[r][0] for r in moving}),
    }
    record(f"upgrade_from_{old_version}", results, faults)
    say(f"{old_version} to {APP_VERSION}: {results['earlier_release']}")
    assert_held(results)
    assert results["runs_by_status"] == {"succeeded": WAITING + MOVING}, results
    # parked runs resumed under this release, on its workers
    assert {ran[r] for r in waiting} <= {(APP_VERSION, "n1"), (APP_VERSION, "n2")}, ran
    # a stretch in flight at the stop ended under the old version, on its workers; one
    # that parked again (an unkeyed call in doubt, in needs_operator) resumed under this one
    for version, executor_id in (ran[r] for r in moving):
        if version == old_version:
            assert executor_id in old_workers, ran
        else:
            assert (version, executor_id) in {(APP_VERSION, "n1"), (APP_VERSION, "n2")}, ran
    assert old_version in {ran[r][0] for r in moving}, ran  # some were mid-plan at the stop
