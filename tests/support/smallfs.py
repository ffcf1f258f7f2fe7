"""A small filesystem a test can fill up: a tmpfs mounted at a directory (as root).

``with small_fs(path, size_kib) as fs:`` mounts it; ``fs.fill()`` writes a ballast
file until the filesystem refuses another byte (ENOSPC), ``fs.free()`` removes
it. ``unavailable_reason()`` says why there can be none here (not root, no
``mount``, mounting refused), for a skip.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SmallFs", "small_fs", "unavailable_reason"]

_CHUNK = 64 * 1024


def _mount(path: Path, size_kib: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def _umount(path: Path) -> None:
    # Lazy: a process that still holds a file open there does not keep the mount.
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def unavailable_reason() -> str | None:
    """None when a tmpfs can be mounted here; else why not."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount on PATH"
    probe = Path(tempfile.mkdtemp(prefix="gh-smallfs-probe-"))
    try:
        done = _mount(probe, 64)
        if done.returncode != 0:
            return f"mount -t tmpfs refused: {done.stderr.strip()[:200]}"
        _umount(probe)
        return None
    finally:
        probe.rmdir()


@dataclass
class SmallFs:
    root: Path
    size_kib: int
    ballast_bytes: int = 0

    @property
    def ballast(self) -> Path:
        return self.root / ".ballast"

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def fill(self, leave_bytes: int = 0) -> int:
        """Write the ballast until the filesystem is full (or only ``leave_bytes`` are
        left); how many bytes the ballast holds."""
        chunk = b"\0" * _CHUNK
        with self.ballast.open("ab") as out:
            while True:
                room = self.free_bytes() - leave_bytes
                if room <= 0:
                    break
                try:
                    out.write(chunk[: min(_CHUNK, room)])
                    out.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
        self.ballast_bytes = self.ballast.stat().st_size
        return self.ballast_bytes

    def free(self) -> None:
        """Remove the ballast: the space it held is free again."""
        self.ballast.unlink(missing_ok=True)
        self.ballast_bytes = 0


@contextmanager
def small_fs(path: Path, size_kib: int) -> Iterator[SmallFs]:
    """A tmpfs of ``size_kib`` KiB mounted at ``path`` (created), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    done = _mount(path, size_kib)
    if done.returncode != 0:
        raise OSError(f"mount -t tmpfs at {path} failed: {done.stderr.strip()}")
    try:
        yield SmallFs(path, size_kib)
    finally:
        _umount(path)
