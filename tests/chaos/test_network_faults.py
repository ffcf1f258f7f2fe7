"""Network faults between the processes and PostgreSQL (issue 18).

The shim and the worker slots reach PostgreSQL through a TCP proxy on loopback
(``tests/support/tcp_proxy.py``); the harness's own checks go direct. While
runs are in flight the proxy adds latency, resets every connection
mid-transaction, swallows everything for longer than any timeout (a black
hole), then refuses and resets connections (a partition) and heals.

A connection caught in the black hole stays in it after the heal, as after a
failover: nothing but the client's own bounds (``GATEHOUSE_PG_*``,
``ledger/_net.py``) can free a worker or the shim blocked on one. So besides the
shared invariants the scenario claims: the workers gave up the dead
connections (the proxy saw their clients close them), the first run made
progress within a bounded time of the heal and every run ended within
``ENDED_WITHIN_S`` of it, and every worker process is alive and heartbeating
at the end (none hung; the harness restarts only workers that died).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contracts import INTENT_WORKFLOW, STRETCH_WORKFLOW
from tests.chaos.client import say
from tests.chaos.harness import DB_NAME, SLOTS, WORKER_ENV, Stack, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.scenario import SCALES, Scenario
from tests.support.pgcluster import unavailable_reason
from tests.support.tcp_proxy import TcpProxy

# Bounds far below the defaults, so a 25 s black hole outlasts every one of them.
NET_ENV = {
    "GATEHOUSE_PG_CONNECT_TIMEOUT_S": "3",
    "GATEHOUSE_PG_KEEPALIVE_IDLE_S": "2",
    "GATEHOUSE_PG_KEEPALIVE_INTERVAL_S": "1",
    "GATEHOUSE_PG_KEEPALIVE_COUNT": "3",
    "GATEHOUSE_PG_TCP_USER_TIMEOUT_S": "5",
    "GATEHOUSE_PG_STATEMENT_TIMEOUT_S": "4",
    "GATEHOUSE_PG_IDLE_IN_TRANSACTION_S": "5",
    "GATEHOUSE_PG_ANSWER_TIMEOUT_S": "8",
}
LATENCY_S = 0.03  # per chunk, each way
LATENCY_FOR_S = 6.0
DROP_ROUNDS = 3
BLACK_HOLE_S = 25.0
PARTITION_S = 8.0
# The invariants on recovery (bounds, not speed figures).
FIRST_PROGRESS_WITHIN_S = 60.0
SHIM_ANSWER_WITHIN_S = 30.0  # an answer bound and a connect bound, with room to spare
ENDED_WITHIN_S = 120.0
SETTLE_S = 150.0


def _steps_done(stack: Stack) -> int:
    """Calls the ledger holds completed, counted directly on the cluster (a call's
    completion is its checkpoint; no DBOS step records it since gatehouse-6)."""
    rows = stack.pg.query(
        DB_NAME, "SELECT count(*) FROM gatehouse.calls WHERE finished_at IS NOT NULL"
    )
    return int(str(rows[0][0]))


def _open_runs(stack: Stack) -> int:
    """Runs' stretches not ended yet (read directly)."""
    rows = stack.pg.query(
        DB_NAME,
        "SELECT count(*) FROM dbos.workflow_status"
        " WHERE status IN ('PENDING', 'ENQUEUED') AND name IN (:n, :s)",
        n=INTENT_WORKFLOW,
        s=STRETCH_WORKFLOW,
    )
    return int(str(rows[0][0]))


def _batch(scenario: Scenario, n: int) -> list[str]:
    run_ids = []
    for _ in range(n):
        run_id = scenario.submit(scenario.plan(list(scenario.channels)))
        scenario.decide(run_id)
        run_ids.append(run_id)
    return run_ids


def _heartbeat_ages(stack: Stack) -> dict[str, float]:
    """Seconds since each worker slot's last heartbeat (read directly)."""
    rows = stack.pg.query(DB_NAME, "SELECT executor_id, heartbeat_at FROM gatehouse.executors")
    now = datetime.now(UTC)
    ages = {}
    for executor_id, at in rows:
        moment = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
        ages[str(executor_id)] = round((now - moment).total_seconds(), 1)
    return ages


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_network_faults_between_the_processes_and_postgres(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the network-fault scenario: {reason}")
    started = time.monotonic()
    worker_env = {**WORKER_ENV, **NET_ENV}
    # The sink holds each answer a moment, so every fault finds calls in flight.
    with running_stack(
        tmp_path, worker_env, sink_delay_s=0.5, proxy=True, shim_env=NET_ENV
    ) as stack:
        proxy = stack.proxy
        assert isinstance(proxy, TcpProxy)
        stack.start_workers(list(SLOTS))
        scenario = Scenario(stack, SCALES["ci"], seed=18)
        figures: dict[str, Any] = {}
        scenario.resolver.start()
        try:
            # 1 latency on every chunk, each way, while runs go through
            say(f"latency {LATENCY_S * 1000:.0f} ms per chunk for {LATENCY_FOR_S:.0f} s")
            proxy.latency(LATENCY_S)
            _batch(scenario, 4)
            time.sleep(LATENCY_FOR_S)
            proxy.pass_through()

            # 2 every connection reset at once, mid-transaction, a few times
            _batch(scenario, 4)
            dropped = []
            for _ in range(DROP_ROUNDS):
                time.sleep(1.0)
                dropped.append(proxy.drop_all())
                say(f"dropped {dropped[-1]} connection(s) (RST)")
            figures["dropped_per_round"] = dropped

            # 3 a black hole longer than every timeout
            hole_runs = _batch(scenario, 4)
            # Strike while they run: steps are being done and runs are still open (a fixed
            # pause let all four finish first on a quiet machine).
            base, wait_until = _steps_done(stack), time.monotonic() + 30
            while time.monotonic() < wait_until and not (
                _steps_done(stack) > base and _open_runs(stack) > 0
            ):
                time.sleep(0.05)
            open_at_hole = _open_runs(stack)
            caught = proxy.black_hole()
            hole_started = time.monotonic()
            say(f"black hole for {BLACK_HOLE_S:.0f} s ({caught} open connection(s) caught)")
            time.sleep(1.0)  # what was already past the proxy lands
            before = _steps_done(stack)
            # The shim, asked something that needs the database, must answer (503), not hang.
            asked = time.monotonic()
            shim_status = stack.api.once("GET", f"/runs/{hole_runs[0]}", "operator").status_code
            shim_answer_s = round(time.monotonic() - asked, 1)
            say(f"the shim answered {shim_status} in the black hole after {shim_answer_s} s")
            time.sleep(max(0.0, BLACK_HOLE_S - (time.monotonic() - hole_started)))
            during = _steps_done(stack) - before
            proxy.heal()
            healed = time.monotonic()
            at_heal = _steps_done(stack)
            first_progress: float | None = None
            while time.monotonic() - healed < FIRST_PROGRESS_WITHIN_S:
                if _steps_done(stack) > at_heal:
                    first_progress = round(time.monotonic() - healed, 1)
                    break
                time.sleep(0.2)
            say(f"healed; first step done {first_progress} s later")
            left = scenario.wait_terminal(hole_runs, ENDED_WITHIN_S)
            ended_after = round(time.monotonic() - healed, 1)
            hole = proxy.stats()
            figures.update(
                {
                    "black_hole_s": BLACK_HOLE_S,
                    "black_hole_caught_open": caught,
                    "runs_open_at_black_hole": open_at_hole,
                    "shim_status_in_black_hole": shim_status,
                    "shim_answer_in_black_hole_s": shim_answer_s,
                    "steps_done_during_black_hole": during,
                    "first_progress_after_heal_s": first_progress,
                    "black_hole_runs_ended_after_heal_s": ended_after,
                    "black_hole_runs_left": left,
                }
            )

            # 4 a partition: refused and reset, then healed
            part_runs = _batch(scenario, 3)
            time.sleep(1.0)
            reset = proxy.partition()
            say(f"partition for {PARTITION_S:.0f} s ({reset} connection(s) reset)")
            time.sleep(PARTITION_S)
            proxy.heal()
            part_healed = time.monotonic()
            part_left = scenario.wait_terminal(part_runs, ENDED_WITHIN_S)
            figures["partition_s"] = PARTITION_S
            figures["partition_reset"] = reset
            figures["partition_runs_ended_after_heal_s"] = round(time.monotonic() - part_healed, 1)
        finally:
            scenario.resolver.stop()
        results = settle_and_check(scenario, SETTLE_S)
        ages = _heartbeat_ages(stack)
        live = sorted(s.executor_id for s in stack.workers.live())
        stats = proxy.stats()
    faults = stats.faults
    lifetimes = hole.black_hole_lifetimes_s
    results["network"] = {
        **figures,
        "timeouts": NET_ENV,
        "latency_per_chunk_s": LATENCY_S,
        "delayed_chunks": stats.delayed_chunks,
        "connections_accepted": stats.accepted,
        "connections_dropped": stats.dropped,
        "connections_black_holed": hole.black_holed,
        "black_holed_closed_by_client": hole.black_holed_closed,
        "black_holed_lifetime_max_s": max(lifetimes, default=None),
        "black_holed_lifetimes_s": sorted(lifetimes),
        "upstream_failed": stats.upstream_failed,
        "heartbeat_age_s": ages,
        "live_workers": live,
        "worker_restarts": stack.figures.get("worker_restarts"),
        "wall_s": round(time.monotonic() - started, 1),
    }
    record(
        "network",
        results,
        {
            "latency": faults.get("latency", 0),
            "dropped": faults.get("drop", 0),
            "black_hole": faults.get("black_hole", 0),
            "partition": faults.get("partition", 0),
        },
    )
    say(f"network: {results['network']}")
    assert_held(results)
    net = results["network"]
    assert results["runs_by_status"] == {"succeeded": results["runs"]}, results["runs_by_status"]
    # The faults happened, and found something to act on.
    assert sum(dropped) > 0 and reset > 0 and stats.delayed_chunks > 0, net
    assert hole.black_holed > 0 and open_at_hole > 0, net
    # Nothing gets through a black hole.
    assert during == 0, net
    # The workers gave up connections that would never answer (the proxy saw it)...
    assert hole.black_holed_closed > 0, net
    # The shim answered in the black hole instead of hanging on a dead connection.
    assert shim_status == 503, net
    assert shim_answer_s <= SHIM_ANSWER_WITHIN_S, net
    # ...and recovered within bounds once the network healed.
    assert first_progress is not None, f"no step done within {FIRST_PROGRESS_WITHIN_S} s: {net}"
    assert left == [], f"runs still open {ENDED_WITHIN_S} s after the black hole healed: {left}"
    assert part_left == [], f"runs still open {ENDED_WITHIN_S} s after the partition: {part_left}"
    # No worker hung: every slot is alive, none exited by itself, each heartbeats now.
    assert live == sorted(SLOTS), live
    assert stack.figures.get("worker_exits_unexpected") == 0
    stale = {e: a for e, a in ages.items() if e in SLOTS and a > 10}
    assert stale == {}, f"workers that stopped heartbeating: {stale}"
