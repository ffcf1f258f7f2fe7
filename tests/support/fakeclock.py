"""A wall clock a test can step while the process that reads it keeps running.

A process started with :meth:`FakeClock.env` loads libfaketime (Debian's
``libfaketime`` package, ``apt-get install faketime``), which adds to every
``CLOCK_REALTIME`` reading (``time.time()``, ``datetime.now()``, libpq's and
DBOS's clocks) the offset written in a file. :meth:`FakeClock.step` rewrites the
file and the process sees the new offset at its next reading
(``FAKETIME_NO_CACHE=1``). ``CLOCK_MONOTONIC`` is left alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``): a real NTP step or a VM restored from a
snapshot moves the wall clock, never the monotonic one. (The kernel's time
namespaces, ``unshare --time --monotonic N``, shift the monotonic and boot
clocks only; ``CLOCK_REALTIME`` cannot be namespaced, hence libfaketime.)

libfaketime 0.9.10 (Debian 12) mishandles an absolute ``clock_nanosleep`` on
``CLOCK_MONOTONIC`` when the monotonic clock is not faked: it shifts the
deadline by the wall-clock offset, so Python's ``time.sleep`` fails with EINVAL
after a forward step and oversleeps by the offset after a backward one. A
ten-line preload compiled here (``gcc``) and loaded before libfaketime sends
such sleeps straight to the kernel.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["LIBFAKETIME", "FakeClock", "unavailable_reason"]

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

_SLEEP_FIX = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
typedef int (*cns_t)(clockid_t, int, const struct timespec *, struct timespec *);
int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
    if (id == CLOCK_REALTIME) {
        cns_t next = (cns_t)dlsym(RTLD_NEXT, "clock_nanosleep");
        return next(id, flags, req, rem);
    }
    return syscall(SYS_clock_nanosleep, id, flags, req, rem) == -1 ? errno : 0;
}
"""


def unavailable_reason() -> str | None:
    """Why a process cannot be given a steppable wall clock here, or None."""
    if not LIBFAKETIME.exists():
        return f"libfaketime is not installed ({LIBFAKETIME}; apt-get install faketime)"
    if shutil.which("gcc") is None:
        return "gcc is not installed (it builds the sleep fix preloaded with libfaketime)"
    return None


def _sleep_fix(folder: Path) -> Path:
    source = folder / "monotonic_sleep_fix.c"
    library = folder / "monotonic_sleep_fix.so"
    source.write_text(_SLEEP_FIX, encoding="utf-8")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
        check=True,
        capture_output=True,
    )
    return library


class FakeClock:
    """One offset file; every process started with :meth:`env` follows it."""

    def __init__(self, folder: Path | None = None) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self.folder = folder or Path(tempfile.mkdtemp(prefix="gh-fakeclock-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.offset_file = self.folder / "offset"
        self.offset_s = 0
        self.steps = 0
        self._fix = _sleep_fix(self.folder)
        self._write()

    def env(self) -> dict[str, str]:
        """The environment that puts a child process on this clock."""
        return {
            "LD_PRELOAD": f"{self._fix} {LIBFAKETIME}",
            "FAKETIME_TIMESTAMP_FILE": str(self.offset_file),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def step(self, seconds: int) -> int:
        """Step the wall clock by ``seconds`` (forward or back); returns the new offset."""
        self.offset_s += seconds
        self.steps += 1
        self._write()
        return self.offset_s

    def set(self, offset_s: int) -> None:
        """Put the wall clock ``offset_s`` from the real one (0: back to true time)."""
        self.offset_s = offset_s
        self.steps += 1
        self._write()

    def _write(self) -> None:
        # Written whole and renamed: a reader never sees half a number.
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(f"{self.offset_s:+d}\n", encoding="utf-8")
        tmp.replace(self.offset_file)
