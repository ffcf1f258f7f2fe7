"""The chaos scenario, phase by phase, and the figures it ends with.

1. crash points — every (crash point x handler) case, each with its exact outcome
2. route probe — the database stopped: every route that needs it answers 503
3. approval storm — 100 concurrent decisions on one run: exactly one takes effect
4. load — runs submitted twice each, approved (a few rejected), while workers
   are killed at random, one slot is killed for good, PostgreSQL crash-restarts
   and its sessions are terminated (``tests.chaos.load``)
5. settle and check — every run terminal, every ledger chain verifies, every
   replay reproduces its trace digest, and the checker sorts every effect
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from policies import catalog
from tests.chaos.book import RunBook
from tests.chaos.checker import Flag, Observation, Verdict, check
from tests.chaos.client import say
from tests.chaos.crashpoints import crash_matrix
from tests.chaos.faults import Faults
from tests.chaos.harness import SLOTS, Stack
from tests.chaos.load import load_with_faults
from tests.chaos.model import Channel, PlannedRun, make_plan
from tests.chaos.probes import approval_storm, decisions_before_pickup, probe_routes
from tests.chaos.resolver import Resolver
from tests.chaos.sink import UNKEYED_PATH

__all__ = ["QUOTAS", "SCALES", "Scale", "Scenario"]

TERMINAL = frozenset({"succeeded", "failed", "rejected", "planned"})


@dataclass(frozen=True)
class Scale:
    name: str
    load_runs: int
    random_kills: int
    db_restarts: int  # during the load phase (the route probe adds one more)
    terminate_rounds: int
    crash_matrix_repeats: int
    gap_s: tuple[float, float]  # between two faults
    down_s: tuple[float, float]  # how long the database stays down per restart
    settle_s: float


SCALES = {
    # The ci tier names no crash points: tests/integration/test_crash_recovery.py
    # kills a worker at each of them on both databases in the same gate; its
    # kills are all at random moments instead.
    "ci": Scale("ci", 45, 40, 5, 6, 0, (0.5, 1.4), (0.2, 2.5), 300),
    "soak": Scale("soak", 300, 210, 32, 55, 2, (0.4, 1.2), (0.2, 4.0), 900),
}


# What the issue asks of each tier, at the least.
QUOTAS = {
    "ci": {"runs": 20, "kills": 40, "db_restarts": 5, "terminate_rounds": 1},
    "soak": {"runs": 200, "kills": 200, "db_restarts": 30, "terminate_rounds": 50},
}


class Scenario:
    def __init__(self, stack: Stack, scale: Scale, seed: int) -> None:
        self.stack = stack
        self.api = stack.api
        self.figures = stack.figures
        self.scale = scale
        self.seed = seed
        self.plan_rng = random.Random(seed)
        self.fault_rng = random.Random(seed + 1)
        self.book = RunBook()
        self.faults = Faults(stack, self.fault_rng, self.figures)
        self.resolver = Resolver(self.api, stack.sink, self.book, self.figures)
        self.interrupted: set[str] = set()
        # What the last final_check read from the ledgers (local effects, flags), so the
        # verdict can be taken again against the sink's truth (see tests.chaos.invariants).
        self.ledger_observations: list[Observation] = []
        self.flags: list[Flag] = []
        self.cases: list[dict[str, Any]] = []
        self.probe: dict[str, int] = {}
        self.storm: dict[str, Any] = {}
        self.handoff: dict[str, Any] = {}
        self.orphaned: list[str] = []
        self._tags = 0
        self._tag_lock = threading.Lock()
        pool = catalog.tool_pool("default").model
        ids = {c.connector_id for c in pool.connectors}
        self.channels = [Channel.NOTE, Channel.KEYED, Channel.UNKEYED, Channel.SHELL]
        if "local-http-unkeyed" not in ids:  # pragma: no cover - the pool ships it
            self.channels.remove(Channel.UNKEYED)

    # ------------------------------------------------------------ helpers
    def plan(self, channels: list[Channel]) -> PlannedRun:
        with self._tag_lock:
            self._tags += 1
            tag = f"r{self._tags:04d}"
        return make_plan(tag, self.stack.sink.base_url, channels)

    def submit(self, planned: PlannedRun) -> str:
        """Submit the intent twice at once under one Idempotency-Key: one run must come of it."""
        body = {
            "recipe": "echo",
            "objective": f"chaos {planned.tag}",
            "mode": "run-plan",
            "plan": planned.plan,
        }
        key = {"Idempotency-Key": f"chaos-{self.seed}-{planned.tag}"}
        barrier = threading.Barrier(2)

        def once() -> str:
            barrier.wait()
            r = self.api.call("POST", "/intent", "submitter", body, key)
            if r.status_code not in (200, 202):
                raise AssertionError(f"submit {planned.tag}: {r.status_code} {r.text[:300]}")
            return str(r.json()["run_id"])

        with ThreadPoolExecutor(2) as pool:
            ids = [f.result() for f in [pool.submit(once), pool.submit(once)]]
        self.figures.add("double_submits")
        for run_id in ids:
            self.book.add(run_id, planned)
        if ids[0] != ids[1]:
            self.figures.fail(f"one Idempotency-Key, two runs: {ids}")
        return ids[0]

    def decide(self, run_id: str, approve: bool = True, who: str = "approver-a") -> None:
        entry = self.book.get(run_id)
        assert entry is not None
        route = "approve" if approve else "reject"
        r = self.api.call("POST", f"/{route}/{run_id}", who, {"plan_digest": entry.planned.digest})
        if r.status_code != 200:
            self.figures.fail(f"{route} {run_id}: {r.status_code} {r.text[:300]}")
            return
        entry.decision = "approved" if approve else "rejected"

    def status(self, run_id: str) -> str:
        view = self.api.json("GET", f"/runs/{run_id}", "operator")
        entry = self.book.get(run_id)
        if entry is not None:
            entry.status = str(view["status"])
            entry.error_code = view.get("error_code")
            entry.error_message = view.get("error_message")
        return str(view["status"])

    def wait_terminal(self, run_ids: list[str], timeout: float) -> list[str]:
        """Wait until every run ended; return those that did not."""
        deadline = time.monotonic() + timeout
        open_ids = list(run_ids)
        last_report = time.monotonic()
        while open_ids and time.monotonic() < deadline:
            open_ids = [r for r in open_ids if self.status(r) not in TERMINAL]
            if time.monotonic() - last_report > 10 and open_ids:
                last_report = time.monotonic()
                waiting: dict[str, int] = {}
                for r in open_ids:
                    e = self.book.get(r)
                    state = e.status if e is not None else "?"
                    waiting[state] = waiting.get(state, 0) + 1
                say(f"waiting for {len(open_ids)} run(s) to end: {waiting}")
            if open_ids:
                time.sleep(0.5)
        return open_ids

    # ------------------------------------------------------------ 5 settle and check
    def settle(self, timeout_s: float | None = None) -> None:
        """Wait for every submitted run to end (``timeout_s``, else the scale's)."""
        run_ids = [e.run_id for e in self.book.all()]
        say(f"settle: waiting for {len(run_ids)} run(s) to end")
        limit = self.scale.settle_s if timeout_s is None else timeout_s
        for run_id in self.wait_terminal(run_ids, limit):
            entry = self.book.get(run_id)
            state = entry.status if entry is not None else "?"
            self.figures.fail(f"run {run_id} never ended (still {state})")

    def final_check(self) -> dict[str, Any]:
        flags = {f.op_key: f for f in self.resolver.all_flags()}
        observations: list[Observation] = []
        verify_ok = replay_match = outbound = replayed_calls = 0
        by_status: dict[str, int] = {}
        entries = self.book.all()
        listed = self._listed_runs()
        for stray in sorted(listed - {e.run_id for e in entries}):
            self.figures.fail(f"a run nobody submitted: {stray}")
        for tag in self.book.split_tags():
            self.figures.fail(f"intent {tag} became more than one run")

        def examine(
            entry: Any,
        ) -> tuple[list[Observation], list[Flag], dict[str, Any], dict[str, Any]]:
            run_id = entry.run_id
            seen: list[Observation] = []
            unresolved: list[Flag] = []
            calls = self.api.json("GET", f"/runs/{run_id}/ledger", "operator")["calls"]
            for c in calls:
                effect_id = f"{entry.planned.tag}.{c['step_id']}"
                if c["status"] == "in_doubt" and c["op_key"] not in flags:
                    unresolved.append(Flag(effect_id, c["op_key"], None, None))
                if c["status"] in ("applied", "not_applied") and c["op_key"] not in flags:
                    self.figures.fail(f"{c['op_key'][:12]} was resolved, but not by the harness")
                local = c["target"] in ("noop", "restricted_shell") and c["kind"] == "tool"
                if local and c["status"] in ("completed", "applied"):
                    seen.append(Observation(effect_id, "ledger"))
            verified = self.api.json("GET", f"/runs/{run_id}/ledger/verify", "operator")
            report = self.api.json("POST", f"/runs/{run_id}/replay", "operator")
            return seen, unresolved, verified, report

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(examine, entries))
        extra_flags: list[Flag] = []
        for entry, (seen, unresolved, verified, report) in zip(entries, results, strict=True):
            status = self.status(entry.run_id)
            by_status[status] = by_status.get(status, 0) + 1
            want = {"approved": "succeeded", "rejected": "rejected"}.get(entry.decision or "", "?")
            if status != want:
                self.figures.fail(
                    f"run {entry.run_id} ({entry.planned.tag}) is {status} ({entry.error_code}:"
                    f" {entry.error_message}); its decision was {entry.decision}"
                )
            observations.extend(seen)
            extra_flags.extend(unresolved)
            verify_ok += int(verified.get("ok") is True)
            if verified.get("ok") is not True:
                broken = verified.get("first_broken")
                self.figures.fail(f"ledger chain of {entry.run_id} does not verify: {broken}")
            replay_match += int(report.get("match") is True)
            outbound += int(report.get("outbound_calls") or 0)
            replayed_calls += int(report.get("calls") or 0)
            if report.get("match") is not True:
                self.figures.fail(f"replay of {entry.run_id} diverged: {report.get('divergences')}")
        self.ledger_observations = observations
        self.flags = list(flags.values()) + extra_flags
        verdict = self.verdict()
        observations = self.observations()
        for category in ("lost", "duplicated", "unexpected", "unflagged", "misresolved"):
            for item in getattr(verdict, category):
                self.figures.fail(f"checker: {category}: {item}")
        adopted = self._adopted()
        for run_id in self.orphaned:
            if run_id not in adopted:
                self.figures.fail(f"run {run_id} of the worker killed for good was never adopted")
        return {
            "runs": len(entries),
            "runs_by_status": by_status,
            "effects_expected": len(self.book.expected()),
            "effects_observed": len(observations),
            "checker": verdict.counts(),
            "interrupted_non_idempotent": len(self.interrupted),
            "cut_off_by_kills": len(self.stack.sink.cut_off),
            "ledger_verified": verify_ok,
            "replay_matched": replay_match,
            "replay_calls_served": replayed_calls,
            "replay_outbound_calls": outbound,
            "orphaned_by_kill_for_good": len(self.orphaned),
            "adopted_from_killed_for_good": len([r for r in self.orphaned if r in adopted]),
        }

    def observations(self) -> list[Observation]:
        """The ledgers' local effects (as last read) and every effect the sink applied."""
        _, applied = self.stack.sink.snapshot()
        return self.ledger_observations + [Observation(a.effect_id, "sink") for a in applied]

    def verdict(self) -> Verdict:
        """The checker's verdict on what the model expects against what was observed."""
        # A call whose answer the sink could not deliver (its caller was killed) was
        # cut off after its effect: on the unkeyed endpoint it must have been flagged.
        self.interrupted |= {e for path, e in self.stack.sink.cut_off if path == UNKEYED_PATH}
        return check(self.book.expected(), self.observations(), self.flags, self.interrupted)

    def _listed_runs(self) -> set[str]:
        found: set[str] = set()
        cursor: str | None = None
        while True:
            path = "/runs?limit=200" + (f"&cursor={cursor}" if cursor else "")
            page = self.api.json("GET", path, "operator")
            found.update(str(r["run_id"]) for r in page["runs"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def _adopted(self) -> set[str]:
        out: set[str] = set()
        for run_id in self.orphaned:
            episodes = self.api.json("GET", f"/runs/{run_id}/episodes", "operator")["episodes"]
            for e in episodes:
                details = (e.get("body") or {}).get("result_details") or {}
                if (
                    e["episode_type"] == "execution/adoption"
                    and details.get("from_executor") == SLOTS[-1]
                ):
                    out.add(run_id)
        return out

    # ------------------------------------------------------------ all of it
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        phases: dict[str, float] = {}

        def timed(name: str, phase: Callable[[], object]) -> None:
            t0 = time.monotonic()
            phase()
            phases[name] = round(time.monotonic() - t0, 1)

        self.resolver.start()
        try:
            timed("crash_points", lambda: crash_matrix(self))
            timed("route_probe", lambda: probe_routes(self))
            timed("approval_storm", lambda: approval_storm(self))
            timed("decisions_before_pickup", lambda: decisions_before_pickup(self))
            timed("load", lambda: load_with_faults(self))
            timed("settle", self.settle)
        finally:
            self.resolver.stop()
        t0 = time.monotonic()
        results = self.final_check()
        phases["check"] = round(time.monotonic() - t0, 1)
        f = self.figures
        kills = {k: f.get(f"kills_{k}") for k in ("random", "crash_point", "for_good")}
        results.update(
            {
                "tier": self.scale.name,
                "seed": self.seed,
                "wall_s": round(time.monotonic() - started, 1),
                "phase_s": phases,
                "kills": {**kills, "total": sum(kills.values())},
                "worker_restarts": f.get("worker_restarts"),
                "worker_exits_unexpected": f.get("worker_exits_unexpected"),
                "db_restarts": f.get("db_restarts"),
                "db_down_s": round(self.faults.down_s_total, 1),
                "terminate_rounds": f.get("terminate_rounds"),
                "terminated_backends": f.get("terminated_backends"),
                "double_submits": f.get("double_submits"),
                "sink_answers_lost": self.stack.sink.answers_lost,
                "split_intents": len(self.book.split_tags()),
                "in_doubt_resolved": {
                    "applied": f.get("in_doubt_resolved_applied"),
                    "not_applied": f.get("in_doubt_resolved_not_applied"),
                },
                "crash_cases": {
                    "total": len(self.cases),
                    "passed": sum(1 for c in self.cases if c["passed"]),
                    "cases": self.cases,
                },
                "route_probe": self.probe,
                "approval_storm": self.storm,
                "decisions_before_pickup": self.handoff,
                "http": {
                    "answered_503": f.get("http_503"),
                    "answered_5xx_not_503": f.get("http_5xx_not_503"),
                    "transport_errors": f.get("http_transport_errors"),
                    "by_route": {k: dict(v) for k, v in sorted(f.statuses.items())},
                },
                "failures": list(f.failures),
                "passed": not f.failures,
            }
        )
        return results
