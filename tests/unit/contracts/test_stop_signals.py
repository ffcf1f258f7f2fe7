"""Two stop signals close together (a Ctrl-C to the process group, then the
supervisor's SIGTERM) always stop a process whose main thread sleeps on
``stop_on_signals``'s event while another thread keeps the interpreter busy. With a
Python handler that set the event itself, the main thread slept on through 9 of 10
such pairs, no handler run."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time

_CHILD = textwrap.dedent(
    """
    import sys, threading
    from contracts import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    threading.Thread(target=lambda: [sum(range(1000)) for _ in iter(int, 1)], daemon=True).start()
    while sys.stdin.read(1):
        stop.clear()
        sys.stdout.write("r"); sys.stdout.flush()
        stop.wait()
        sys.stdout.write("d"); sys.stdout.flush()
    """
)
ROUNDS = 20


def _read_one(child: subprocess.Popen[bytes], seconds: float) -> bytes:
    """One byte of the child's answer, straight from the pipe (no buffer between)."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], seconds)
    return os.read(child.stdout.fileno(), 1) if ready else b""


def test_a_pair_of_stop_signals_always_stops_the_wait() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
    )  # fmt: skip
    assert child.stdin is not None
    try:
        for round_ in range(ROUNDS):
            child.stdin.write(b"g")
            child.stdin.flush()
            assert _read_one(child, 60) == b"r", f"round {round_}: the child did not wait"
            time.sleep(0.02)  # the child's main thread asleep in its wait
            child.send_signal(signal.SIGINT)
            child.send_signal(signal.SIGTERM)
            assert _read_one(child, 10) == b"d", f"round {round_}: the wait never ended"
        child.stdin.close()
        assert child.wait(timeout=10) == 0  # neither signal ended it by itself
    finally:
        child.kill()
        child.wait()
