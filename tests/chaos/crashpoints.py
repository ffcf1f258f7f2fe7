"""Named crash points by handler, each with its exact expected outcome, and the
phase that runs them.

One case at a time, a worker is started with
``GATEHOUSE_CRASH_POINT=<point>:<step_id>`` while the other slots are stopped,
takes the case's run and exits like ``kill -9`` at the point. Every run carries
one step per handler (``note``, ``keyed``, ``unkeyed``, ``shell``), so the
point is always reached. The worker is started again without the crash point
and the run must end exactly as ``expected_outcome`` says.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tests.chaos.client import say
from tests.chaos.harness import SLOTS
from tests.chaos.model import NON_IDEMPOTENT, STEP_ID, Channel

if TYPE_CHECKING:
    from tests.chaos.scenario import Scenario

__all__ = [
    "CALL_POINTS",
    "RUN_POINTS",
    "Case",
    "Expected",
    "all_cases",
    "crash_matrix",
    "expected_outcome",
    "wait_until",
]

CALL_POINTS = ("before_claim", "after_claim", "after_effect", "after_completion")
RUN_POINTS = ("approval_wait", "after_approval")


@dataclass(frozen=True)
class Case:
    point: str
    channel: Channel | None  # None for run points (step id "@run")

    @property
    def setting(self) -> str:
        step = "@run" if self.channel is None else STEP_ID[self.channel]
        return f"{self.point}:{step}"

    @property
    def name(self) -> str:
        return self.point if self.channel is None else f"{self.point}/{self.channel.value}"


@dataclass(frozen=True)
class Expected:
    """What the crashed step must show once its run has ended."""

    flagged: bool  # its call was flagged in doubt
    resolution: str | None  # how the operator (the harness) must resolve it
    requests: int | None  # requests the sink received for its effect (http only)
    attempts: int  # ledger entries (attempts) for the step


def expected_outcome(case: Case) -> Expected:
    channel = case.channel
    http = channel in (Channel.KEYED, Channel.UNKEYED)
    once = Expected(flagged=False, resolution=None, requests=1 if http else None, attempts=1)
    if channel is None or case.point in ("before_claim", "after_completion"):
        # before the claim: nothing happened yet; after completion: served from the ledger
        return once
    if channel not in NON_IDEMPOTENT:
        if case.point == "after_effect" and channel is Channel.KEYED:
            # sent again with the same Idempotency-Key; the sink applies it once
            return Expected(flagged=False, resolution=None, requests=2, attempts=1)
        return once
    if case.point == "after_claim":
        # never sent: the operator says not_applied and it goes out once, as attempt 2
        return Expected(
            flagged=True, resolution="not_applied", requests=1 if http else None, attempts=2
        )
    # after_effect: it did happen
    if channel is Channel.UNKEYED:
        return Expected(flagged=True, resolution="applied", requests=1, attempts=1)
    # a shell command has no outside witness; it only reads, so it is run again
    return Expected(flagged=True, resolution="not_applied", requests=None, attempts=2)


def all_cases(channels: list[Channel]) -> list[Case]:
    cases = [Case(point, channel) for point in CALL_POINTS for channel in channels]
    return cases + [Case(point, None) for point in RUN_POINTS]


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def crash_matrix(sc: Scenario) -> None:
    """Each case on its own: one worker, started with the crash point, takes the
    case's run and dies at the point; it is started again without it and the
    run must end exactly as the case says. One case at a time, because a
    recovered run goes back to the shared queue, where another crash-point
    worker would take it and crash it somewhere else."""
    cases = all_cases(sc.channels) * sc.scale.crash_matrix_repeats
    if not cases:
        say("crash points: none in this tier (test_crash_recovery covers each point)")
        return
    say(f"crash points: {len(cases)} case(s), one at a time on worker {SLOTS[0]}")
    crashed: list[str] = []

    def on_crash(slot: Any) -> None:
        crashed.extend(sc.faults.pending_runs(slot.executor_id))

    for executor_id in SLOTS[1:]:
        sc.stack.workers.pause(executor_id)
    sc.stack.workers.on_crash = on_crash
    try:
        for case in cases:
            crashed.clear()
            _crash_case(sc, case, crashed)
    finally:
        sc.stack.workers.on_crash = None
    for executor_id in SLOTS:  # back to ordinary workers for what follows
        sc.stack.workers.replace(executor_id, None, {})
    sc.stack.workers.wait_ready(list(SLOTS))


def _crash_case(sc: Scenario, case: Case, crashed: list[str]) -> None:
    worker = SLOTS[0]
    sc.stack.workers.replace(worker, case.setting, {})
    sc.stack.workers.wait_ready([worker])
    run_id = sc.submit(sc.plan(list(sc.channels)))
    # The worker takes the run and parks it at its plan card; the approval_wait
    # worker dies on its way to the park. Any other point needs the approval (and
    # the hand-off to the run's next stretch) to get there.
    wait_until(
        lambda: run_id in crashed or sc.faults.parked(run_id),
        60,
        f"worker {worker} to take the run of case {case.name}",
    )
    if case.point != "approval_wait":
        sc.decide(run_id)
    wait_until(lambda: run_id in crashed, 60, f"worker {worker} to reach {case.setting}")
    if case.point == "approval_wait":
        sc.decide(run_id)
    if sc.wait_terminal([run_id], 120):
        sc.figures.fail(f"crash case {case.name}: run {run_id} did not end")
    _check_case(sc, case, run_id)


def _check_case(sc: Scenario, case: Case, run_id: str) -> None:
    entry = sc.book.get(run_id)
    assert entry is not None
    entry.case = case.name
    want = expected_outcome(case)
    status = sc.status(run_id)
    calls = sc.api.json("GET", f"/runs/{run_id}/ledger", "operator")["calls"]
    tool_calls = [c for c in calls if c["kind"] == "tool"]
    flags = {f.op_key: f for f in sc.resolver.all_flags()}
    problems: list[str] = []
    if status != "succeeded":
        problems.append(f"status {status} ({entry.error_code})")
    observed: dict[str, Any] = {"status": status}
    for effect in entry.planned.effects:
        step_calls = [c for c in tool_calls if c["step_id"] == effect.step_id]
        step_flags = [flags[c["op_key"]] for c in step_calls if c["op_key"] in flags]
        received, _ = sc.stack.sink.snapshot()
        requests = sum(1 for r in received if r.effect_id == effect.effect_id)
        is_target = case.channel is effect.channel and effect.step_id == effect.channel.value
        exp = (
            want
            if is_target
            else expected_outcome(Case("after_completion", effect.channel))  # untouched: once
        )
        got_resolution = step_flags[0].resolution if step_flags else None
        if bool(step_flags) != exp.flagged or got_resolution != exp.resolution:
            problems.append(
                f"{effect.step_id}: flagged={bool(step_flags)} ({got_resolution}),"
                f" expected flagged={exp.flagged} ({exp.resolution})"
            )
        if len(step_calls) != exp.attempts:
            problems.append(
                f"{effect.step_id}: {len(step_calls)} attempt(s), expected {exp.attempts}"
            )
        if exp.requests is not None and requests != exp.requests:
            problems.append(
                f"{effect.step_id}: sink got {requests} request(s), expected {exp.requests}"
            )
        if is_target:
            observed.update(
                {
                    "attempts": len(step_calls),
                    "requests": requests,
                    "resolution": got_resolution,
                }
            )
            if case.point in ("after_claim", "after_effect") and effect.channel in NON_IDEMPOTENT:
                sc.interrupted.add(effect.effect_id)
    passed = not problems
    sc.cases.append(
        {
            "case": case.name,
            "run_id": run_id,
            "expected": asdict(want),
            "observed": observed,
            "passed": passed,
            "problems": problems,
        }
    )
    say(f"case {case.name}: {'as expected' if passed else '; '.join(problems)}")
    if not passed:
        sc.figures.fail(f"crash case {case.name} ({run_id}): {'; '.join(problems)}")
