"""A pids cgroup per sandboxed program: the process limit that holds for root too.

RLIMIT_NPROC does not bind a process whose real user is root, and a worker that
runs as root maps the sandbox's user to root outside it; so the number of
processes is capped by a cgroup instead, where one can be made (cgroup v1's
``pids`` hierarchy, or v2 with the ``pids`` controller enabled at the root).
The program enters it before it execs (``ENTER``), so nothing it starts escapes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

__all__ = ["ENTER", "PidsCgroup", "pids_root"]

_V1 = Path("/sys/fs/cgroup/pids")
_V2 = Path("/sys/fs/cgroup")
# Run by the interpreter with -I -S: write our pid into the cgroup, then become argv[2:].
ENTER = (
    "import os, sys\n"
    "with open(sys.argv[1], 'w') as f: f.write(str(os.getpid()))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def pids_root() -> Path | None:
    """Where per-program pids cgroups can be made, or None."""
    if (_V1 / "cgroup.procs").exists() and os.access(_V1, os.W_OK):
        return _V1
    control = _V2 / "cgroup.subtree_control"
    try:
        if "pids" in control.read_text().split() and os.access(_V2, os.W_OK):
            return _V2
    except OSError:
        return None
    return None


class PidsCgroup:
    """``with PidsCgroup(root, limit) as procs:`` a fresh cgroup; removed after,
    any process still in it killed first."""

    def __init__(self, root: Path, limit: int) -> None:
        self.path = root / f"gatehouse-sandbox-{uuid.uuid4().hex[:16]}"
        self.limit = limit

    def __enter__(self) -> Path:
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(self.limit))
        return self.path / "cgroup.procs"

    def __exit__(self, *_exc: object) -> None:
        for _ in range(100):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.path.rmdir()
                return
            time.sleep(0.01)
