"""Overload: intents arriving faster than workers take them.

No worker runs while two submitters flood the shim, so every intent it takes
stays queued: a greedy one, many at once, and a modest one, a few. The queue
bound (``GATEHOUSE_MAX_QUEUED``) and each submitter's share
(``GATEHOUSE_MAX_QUEUED_PER_SUBMITTER``) must hold: refusals are 429 / 503 with
``Retry-After``, the greedy submitter cannot keep the modest one out, reads keep
being answered, and nothing refused is stored. Then workers start (one is killed
while they drain the backlog), the clients send their refused intents again
after the ``Retry-After`` while approvers decide, and every accepted intent
must run once and end.
"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.chaos.client import say
from tests.chaos.harness import DB_NAME, SLOTS, WORKER_ENV, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.model import Channel, PlannedRun
from tests.chaos.scenario import SCALES, Scenario
from tests.support.pgcluster import unavailable_reason

MAX_QUEUED = 30
SHARE = 20
GREEDY, MODEST = 60, 15
LIMITS = {
    "GATEHOUSE_MAX_QUEUED": str(MAX_QUEUED),
    "GATEHOUSE_MAX_QUEUED_PER_SUBMITTER": str(SHARE),
}
# Retry-After says 5 s; the test's clients wait at most this long, to stay short.
CLIENT_WAIT_CAP_S = 1.0


class Client:
    """One submitter: sends an intent, and when refused for load, waits and sends it
    again under the same Idempotency-Key, as a well-behaved client does."""

    def __init__(self, scenario: Scenario, who: str) -> None:
        self.scenario = scenario
        self.who = who
        self.refused: dict[str, int] = {}
        self.without_retry_after = 0
        self.accepted_first_try = 0
        self.lock = threading.Lock()

    def send(self, planned: PlannedRun, retry: bool) -> str | None:
        body = {
            "recipe": "echo",
            "objective": f"overload {planned.tag}",
            "mode": "run-plan",
            "plan": planned.plan,
        }
        key = {"Idempotency-Key": f"overload-{planned.tag}"}
        first = True
        while True:
            r = self.scenario.api.once("POST", "/intent", self.who, body, key)
            if r.status_code == 202:
                run_id = str(r.json()["run_id"])
                self.scenario.book.add(run_id, planned)
                with self.lock:
                    self.accepted_first_try += int(first)
                return run_id
            code = r.json().get("error", {}).get("code", str(r.status_code))
            if r.status_code not in (429, 503):
                raise AssertionError(f"intent {planned.tag}: {r.status_code} {r.text[:300]}")
            with self.lock:
                self.refused[code] = self.refused.get(code, 0) + 1
                if "retry-after" not in r.headers:
                    self.without_retry_after += 1
            if not retry:
                return None
            first = False
            time.sleep(min(CLIENT_WAIT_CAP_S, float(r.headers.get("retry-after", "1"))))


def _queued(scenario: Scenario) -> int:
    rows = scenario.stack.pg.query(
        DB_NAME, "SELECT count(*) FROM gatehouse.runs WHERE status = 'queued'"
    )
    return int(str(rows[0][0]))


def _approve_all(scenario: Scenario, going: threading.Event) -> None:
    """Approve every run in the book once, until told to stop and none is left."""
    decided: set[str] = set()
    while True:
        undecided = [e for e in scenario.book.all() if e.run_id not in decided]
        for entry in undecided:
            scenario.decide(entry.run_id)
            decided.add(entry.run_id)
        if not undecided and not going.is_set():
            return
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_overload_is_refused_at_the_door_and_nothing_accepted_is_dropped(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster for the overload scenario: {reason}")
    with running_stack(tmp_path, WORKER_ENV, shim_env=LIMITS) as stack:
        scenario = Scenario(stack, SCALES["ci"], seed=18)
        channels = [Channel.NOTE, Channel.KEYED, Channel.UNKEYED]
        greedy, modest = Client(scenario, "submitter"), Client(scenario, "submitter-b")
        greedy_plans = [scenario.plan(channels) for _ in range(GREEDY)]
        modest_plans = [scenario.plan(channels) for _ in range(MODEST)]

        # 1. The flood, no worker running: nothing leaves the queue.
        reads: list[float] = []
        read_codes: dict[int, int] = {}
        flooding = threading.Event()
        flooding.set()

        def reader() -> None:
            while flooding.is_set():
                t0 = time.monotonic()
                r = scenario.api.once("GET", "/runs?limit=5", "operator")
                reads.append(time.monotonic() - t0)
                read_codes[r.status_code] = read_codes.get(r.status_code, 0) + 1
                time.sleep(0.05)

        watcher = threading.Thread(target=reader, daemon=True)
        watcher.start()
        say(f"flood: {GREEDY} intents from one submitter, {MODEST} from another, no worker")
        with ThreadPoolExecutor(8) as pool:
            first_greedy = list(pool.map(lambda p: greedy.send(p, retry=False), greedy_plans))
            first_modest = list(pool.map(lambda p: modest.send(p, retry=False), modest_plans))
        flooding.clear()
        watcher.join()
        depth = _queued(scenario)
        taken_greedy = sum(1 for r in first_greedy if r is not None)
        taken_modest = sum(1 for r in first_modest if r is not None)
        say(f"flood: greedy {taken_greedy} in, modest {taken_modest} in, queue {depth}")
        # The bounds held (counted, not locked: concurrent sends may pass by a few).
        assert depth <= MAX_QUEUED + 8, depth
        assert SHARE <= taken_greedy <= SHARE + 8, greedy.refused
        assert greedy.refused.get("queue_share_exceeded", 0) > 0, greedy.refused
        assert taken_modest >= min(MODEST, MAX_QUEUED - taken_greedy), modest.refused
        assert greedy.without_retry_after == modest.without_retry_after == 0
        assert read_codes.get(200, 0) > 0 and set(read_codes) == {200}, read_codes
        refused_stored = scenario.stack.pg.query(DB_NAME, "SELECT count(*) FROM gatehouse.runs")
        assert int(str(refused_stored[0][0])) == taken_greedy + taken_modest

        # 2. Workers start; the clients send what was refused again; one worker dies.
        scenario.resolver.start()
        try:
            stack.start_workers(list(SLOTS[:2]))
            left = [p for p, r in zip(greedy_plans, first_greedy, strict=True) if r is None]
            left_modest = [p for p, r in zip(modest_plans, first_modest, strict=True) if r is None]
            killer = threading.Timer(2.0, lambda: scenario.faults.kill_random_worker(0))
            killer.start()
            # Approvers decide as runs come in: a run waiting for approval holds a
            # DBOS queue slot, so a backlog nobody approves would stall the queue.
            approving = threading.Event()
            approving.set()
            approver = threading.Thread(target=_approve_all, args=(scenario, approving))
            approver.start()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda p: greedy.send(p, retry=True), left))
                list(pool.map(lambda p: modest.send(p, retry=True), left_modest))
            killer.join()
            approving.clear()
            approver.join()
            results = settle_and_check(scenario, 240)
        finally:
            scenario.resolver.stop()
    refused = {
        k: greedy.refused.get(k, 0) + modest.refused.get(k, 0)
        for k in set(greedy.refused) | set(modest.refused)
    }
    results["overload"] = {
        "max_queued": MAX_QUEUED,
        "share": SHARE,
        "queue_depth_at_flood_end": depth,
        "greedy_taken_in_flood": taken_greedy,
        "modest_taken_in_flood": taken_modest,
        "refusals": refused,
        "refusals_without_retry_after": greedy.without_retry_after + modest.without_retry_after,
        "reads_during_flood": sum(read_codes.values()),
        "read_median_ms": round(statistics.median(reads) * 1000, 1) if reads else None,
    }
    record(
        "overload",
        results,
        {"refused_429": refused.get("queue_share_exceeded", 0),
         "refused_503": refused.get("overloaded", 0),
         "worker_kills": stack.figures.get("kills_random")},
    )  # fmt: skip
    assert_held(results)
    assert results["runs"] == GREEDY + MODEST, results["runs"]
    assert results["runs_by_status"] == {"succeeded": GREEDY + MODEST}, results["runs_by_status"]
