"""A stop asked for by SIGTERM or SIGINT, as a ``threading.Event`` to wait on.

CPython runs a signal's Python handler in the main thread only, when that thread
next runs a bytecode. A main thread asleep on a lock (``Event.wait`` with no
timeout, as a worker waits for its stop) does not always wake for it: with one
other thread busy, a SIGINT and a SIGTERM sent together (a Ctrl-C reaches a whole
process group; the supervisor that got it too sends its SIGTERM a moment later)
left the main thread asleep, no handler run, on 9 of 10 tries; one signal alone,
on none. A worker hung so until ``gatehouse up`` killed it.

``stop_on_signals`` sets the event from a thread of its own instead: the
interpreter's C-level handler, in whichever thread the kernel chose, writes each
signal's number to a pipe (``signal.set_wakeup_fd``), and that thread reads the
pipe. The Python-level handler does nothing; it is there so that the signal
neither ends the process nor raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["stop_on_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _ignore(signum: int, frame: object) -> None:
    """Nothing: the pipe's reader does the work (see the module's docstring)."""


def stop_on_signals(stop: threading.Event) -> None:
    """Set ``stop`` when the process is sent SIGTERM or SIGINT (any number of times,
    at any instant). Called once, from the main thread, before the signals matter."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # the C handler must never block
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _ignore)

    def watch() -> None:
        while True:
            for number in os.read(read_end, 64):
                if number in STOP_SIGNALS:
                    stop.set()

    threading.Thread(target=watch, name="stop-signals", daemon=True).start()
