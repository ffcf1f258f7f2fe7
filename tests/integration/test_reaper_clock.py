"""The reaper under a stepped wall clock: liveness is never read off a wall clock.

Worker ``skewed`` runs on a wall clock the test steps (+1 h, back, -1 h, +1 day;
``tests.support.fakeclock``), worker ``steady`` on the real one. While both are
alive, nobody is declared dead. Then ``skewed`` is killed with its clock a day
ahead; ``steady`` must still see the stall and hand it over within seconds.

Before liveness was judged by heartbeat counters on the observer's monotonic
clock, both halves failed: a worker an hour behind looked an hour dead to the
leader, a leader a day ahead found every other heartbeat a day old, and a lease
written by a clock a day ahead kept anyone from taking it over for a day.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from ledger import migrate, open_database
from shim.local import start_worker, stop
from tests.support import fakeclock

DEAD_AFTER_S = 3.0
POLL_S = 0.25
FAST = {"GATEHOUSE_HEARTBEAT_S": "0.5", "GATEHOUSE_DEAD_AFTER_S": str(DEAD_AFTER_S)}
HOUR, DAY = 3600, 86400
# Each offset is held longer than dead_after_s, so a wrong judgement has time to happen.
STEPS = [(+HOUR, 4.0), (0, 3.0), (-HOUR, 4.0), (+DAY, 4.0)]


def test_the_fake_clock_steps_the_wall_clock_only(tmp_path: Path) -> None:
    """The helper itself: the child's wall clock follows the steps, its monotonic
    clock does not, and ``time.sleep`` still sleeps what it was asked."""
    reason = fakeclock.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    clock = fakeclock.FakeClock(tmp_path / "clock")
    probe = (
        "import sys, time\n"
        "for line in sys.stdin:\n"
        "    m = time.monotonic(); time.sleep(0.05)\n"
        "    print(round(time.time()), round(time.monotonic() - m, 2), flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", probe],
        env={**os.environ, **clock.env()},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        seen = []
        for offset in (0, +HOUR, -DAY, 0):
            clock.set(offset)
            child.stdin.write("\n")
            child.stdin.flush()
            wall, took = child.stdout.readline().split()
            seen.append((int(wall) - round(time.time()), float(took)))
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    for (skew, duration), offset in zip(seen, (0, +HOUR, -DAY, 0), strict=True):
        assert abs(skew - offset) <= 1, seen
        assert 0.04 <= duration < 1.0, seen


class Watch:
    """The test's own view of each worker's heartbeat counter, timed on its monotonic clock.

    A worker that really fell silent (a loaded machine can hold a process, or its
    SQLite write, for seconds) is rightly reaped whatever the clocks say; the fault
    this test hunts is a worker reaped while its counter kept moving. When the reaper
    marks a worker, its counter is the one it judged standing (``mark_reaped`` is
    conditional on it), so the time the test saw that same value tells the two apart.
    """

    def __init__(self, db_url: str) -> None:
        self.db = open_database(db_url)
        self.moved: dict[str, tuple[int, float]] = {}  # id -> (counter, when it last moved)
        self.excused: list[str] = []

    def rows(self) -> dict[str, tuple[int, str | None]]:
        with self.db.engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT executor_id, beat, reaped_at FROM executors")
            ).all()
        now = time.monotonic()
        state = {str(r[0]): (int(r[1]), r[2]) for r in found}
        for executor_id, (beat, _) in state.items():
            if self.moved.get(executor_id, (None, 0.0))[0] != beat:
                self.moved[executor_id] = (beat, now)
        return state

    def reaped(self) -> dict[str, str | None]:
        return {k: reaped_at for k, (_, reaped_at) in self.rows().items()}

    def falsely_reaped(self, context: str) -> dict[str, str]:
        """Workers marked dead whose counter the test saw move less than dead-after ago."""
        wrong = {}
        for executor_id, reaped_at in self.reaped().items():
            if reaped_at is None:
                continue
            standing = time.monotonic() - self.moved[executor_id][1]
            if standing < DEAD_AFTER_S - 2 * POLL_S:  # the polls' own granularity
                wrong[executor_id] = f"{reaped_at} (its counter moved {standing:.1f} s before)"
            elif executor_id not in self.excused:
                self.excused.append(executor_id)
                print(f"{context}: {executor_id} really fell silent ({standing:.1f} s); reaped")
        return wrong

    def close(self) -> None:
        self.db.dispose()


def _tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_stepped_wall_clock_neither_kills_the_living_nor_hides_the_dead(
    db_url: str, tmp_path: Path
) -> None:
    reason = fakeclock.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    db = open_database(db_url)
    migrate(db)
    db.dispose()
    clock = fakeclock.FakeClock(tmp_path / "clock")
    ws = tmp_path / "ws"
    logs = {name: tmp_path / f"{name}.log" for name in ("skewed", "steady")}
    skewed = start_worker(db_url, "skewed", ws, logs["skewed"], {**FAST, **clock.env()})
    steady = start_worker(db_url, "steady", ws, logs["steady"], FAST)
    watch = Watch(db_url)

    def diagnosis() -> str:
        return "\n".join(f"--- {name}.log\n{_tail(path)}" for name, path in logs.items())

    try:
        deadline = time.monotonic() + 90
        while set(watch.reaped()) != {"skewed", "steady"} or not all(
            p.exists() and " ready " in p.read_text(errors="replace") for p in logs.values()
        ):
            assert time.monotonic() < deadline, "both workers did not start"
            assert skewed.poll() is None and steady.poll() is None
            time.sleep(POLL_S)
        time.sleep(2)  # a few ticks: one of them holds the reaper lease
        for offset, hold_s in STEPS:
            clock.set(offset)
            end = time.monotonic() + hold_s
            while time.monotonic() < end:
                wrong = watch.falsely_reaped(f"clock {offset:+d} s")
                assert wrong == {}, (
                    f"clock {offset:+d} s: a live worker was reaped: {wrong}\n{diagnosis()}"
                )
                time.sleep(POLL_S)
        assert skewed.poll() is None and steady.poll() is None

        # A real stall, with the dead worker's last word written a day ahead.
        os.kill(skewed.pid, signal.SIGKILL)
        skewed.wait(timeout=10)
        killed = time.monotonic()
        while watch.reaped().get("skewed") is None:
            waited = time.monotonic() - killed
            assert waited < 20, f"the dead worker was never reaped\n{diagnosis()}"
            time.sleep(POLL_S)
        print(f"skewed worker reaped {time.monotonic() - killed:.1f} s after its kill")
        assert watch.falsely_reaped("after the kill") == {}, diagnosis()
        assert watch.reaped().get("steady") is None, diagnosis()
    finally:
        watch.close()
        stop([skewed, steady])
