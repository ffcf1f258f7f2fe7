"""Phase 4 of the chaos scenario: load with faults.

Runs are submitted (each twice under one Idempotency-Key) and decided three at a
time for as long as the faults go on: workers killed at random, PostgreSQL
crash-restarted (every other time with a worker killed while it is away), its
sessions terminated, and once the last worker slot killed for good so a live
worker's reaper must adopt what it held.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from tests.chaos.client import say
from tests.chaos.crashpoints import wait_until
from tests.chaos.harness import SLOTS
from tests.chaos.model import random_channels

if TYPE_CHECKING:
    from tests.chaos.scenario import Scenario

__all__ = ["kill_for_good", "load_with_faults"]


def load_with_faults(sc: Scenario) -> None:
    """Phase 4: the scale's faults, in a seeded order, while runs keep coming."""
    s = sc.scale
    events = (
        ["kill"] * s.random_kills + ["restart"] * s.db_restarts + ["terminate"] * s.terminate_rounds
    )
    sc.fault_rng.shuffle(events)
    events.insert(len(events) // 4, "kill_for_good")
    window = len(events) * (sum(s.gap_s) / 2 + 0.4)
    say(f"load: {s.load_runs}+ run(s) over ~{window:.0f} s with {len(events)} fault(s)")
    faults_done = threading.Event()
    submitter = threading.Thread(target=_submit_load, args=(sc, window, faults_done), daemon=True)
    submitter.start()
    restarts = 0
    for n, event in enumerate(events, 1):
        time.sleep(sc.fault_rng.uniform(*s.gap_s))
        if n % 10 == 0:
            say(f"fault {n}/{len(events)}; {len(sc.book.all())} run(s) submitted")
        if event == "kill":
            sc.faults.kill_random_worker()
        elif event == "restart":
            restarts += 1
            # every other restart also kills a worker while the database is away
            sc.faults.restart_database(sc.fault_rng.uniform(*s.down_s), restarts % 2 == 0)
        elif event == "terminate":
            sc.faults.terminate_connections()
        else:
            kill_for_good(sc)
    faults_done.set()
    submitter.join()


def _submit_load(sc: Scenario, window: float, faults_done: threading.Event) -> None:
    """Keep runs in flight for as long as the faults go on (and at least ``load_runs``),
    three at a time, so a kill or a restart finds several runs mid-call."""
    burst = 3
    pause = window * burst / max(1, sc.scale.load_runs)
    submitted = 0
    while submitted < sc.scale.load_runs or not faults_done.is_set():
        for _ in range(burst):
            planned = sc.plan(random_channels(sc.plan_rng, sc.channels, 2, 5))
            try:
                run_id = sc.submit(planned)
                sc.decide(run_id, approve=sc.plan_rng.random() >= 0.1)
            except (TimeoutError, AssertionError) as exc:
                sc.figures.fail(f"load submit {planned.tag}: {exc}")
            submitted += 1
        time.sleep(pause)


def kill_for_good(sc: Scenario) -> None:
    """Kill the last slot for good (never restarted) once it holds a run; start w4."""
    victim = SLOTS[-1]
    try:
        wait_until(lambda: bool(sc.faults.pending_runs(victim)), 20, f"{victim} to hold a run")
    except TimeoutError:
        say(f"{victim} holds no run; killing it for good anyway")
    sc.stack.workers.retire(victim)
    # Read after the kill: a run the worker finished between a read before it and the
    # kill would be counted as orphaned and never adopted (its workflow had ended). The
    # others hand its runs over only after it has been silent for dead_after_s.
    sc.orphaned = sc.faults.pending_runs(victim)
    say(f"kill -9 worker {victim} for good, holding {len(sc.orphaned)} run(s); starting w4")
    sc.stack.workers.start("w4")
