"""Shell steps in a bubblewrap sandbox.

What a sandboxed program gets (``Sandbox.run_prefix``):

* new user, mount, PID, IPC, UTS, cgroup and network namespaces (``--unshare-all``):
  no network at all, not even loopback; it sees only its own processes;
* user and group 65534 inside, all capabilities dropped, no new privileges, no
  further user namespaces (``--disable-userns``), a new session (no terminal
  injection), and it dies with its parent;
* a read-only system: ``/usr`` (with the merged-usr links ``/bin``, ``/lib``,
  ``/lib64``, ``/sbin``) and a short list of harmless ``/etc`` files; nothing else
  of the host (no ``/root``, ``/home``, ``/var``, ``/srv``, no project folder, no
  database file, no tokens, no ``/sys``); its own ``/proc``, ``/dev`` and ``/tmp``;
* the run's workspace, read-write, at its own path, as the working directory;
* limits (``prlimit``): CPU seconds, address space, file size, open files; and a
  pids cgroup for the number of processes where one can be made (``cgroup.py``).

The wall-clock timeout and output caps stay the handler's. ``GATEHOUSE_BWRAP``
names the bubblewrap binary (default: ``bwrap`` on PATH); ``off`` means this
worker has no sandbox (shell steps are then refused unless the profile allows
them unsandboxed).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from contracts import JsonObject, JsonValue, Limits
from worker.sandbox.cgroup import ENTER, PidsCgroup, pids_root

__all__ = ["BWRAP_ENV", "DEFAULT_LIMITS", "Sandbox", "SandboxLimits", "find_sandbox", "limits_for"]

BWRAP_ENV = "GATEHOUSE_BWRAP"
NAMESPACES = ("user", "mount", "pid", "ipc", "uts", "cgroup", "net")
_ETC = (
    "passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "localtime", "timezone", "alternatives", "mime.types",
)  # fmt: skip
_USR_LINKS = (
    ("usr/bin", "/bin"),
    ("usr/lib", "/lib"),
    ("usr/lib64", "/lib64"),
    ("usr/sbin", "/sbin"),
)


@dataclass(frozen=True)
class SandboxLimits:
    cpu_s: int
    memory_bytes: int
    file_size_bytes: int
    open_files: int
    processes: int

    def to_json(self) -> JsonObject:
        return {"cpu_s": self.cpu_s, "memory_bytes": self.memory_bytes,
                "file_size_bytes": self.file_size_bytes, "open_files": self.open_files,
                "processes": self.processes}  # fmt: skip


DEFAULT_LIMITS = SandboxLimits(
    cpu_s=60, memory_bytes=1 << 30, file_size_bytes=64 << 20, open_files=256, processes=64
)


def limits_for(limits: Limits) -> SandboxLimits:
    """The sandbox's limits for a connector: CPU time never above its wall-clock timeout."""
    cpu = max(1, min(DEFAULT_LIMITS.cpu_s, math.ceil(limits.timeout_s)))
    size = max(DEFAULT_LIMITS.file_size_bytes, limits.max_output_bytes)
    return SandboxLimits(cpu, DEFAULT_LIMITS.memory_bytes, size, DEFAULT_LIMITS.open_files,
                         DEFAULT_LIMITS.processes)  # fmt: skip


@dataclass(frozen=True)
class Sandbox:
    bwrap: str
    version: str
    pids: Path | None = field(default=None)  # where pids cgroups are made, if anywhere

    def profile(self, limits: SandboxLimits) -> JsonObject:
        """What is recorded in a step's evidence: the sandbox in force."""
        ns: list[JsonValue] = list(NAMESPACES)
        return {
            "tool": "bubblewrap",
            "version": self.version,
            "namespaces": ns,
            "network": False,
            "uid": 65534,
            "capabilities": "none",
            "writable": "workspace",
            "limits": limits.to_json(),
            "processes_enforced_by": "pids cgroup" if self.pids is not None else "none",
        }

    def base_args(self) -> list[str]:
        """Every namespace (no network), uid 65534, no capabilities, no further user
        namespaces, dies with its parent; /usr and a few harmless /etc files read-only."""
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
                "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534",
                "--ro-bind", "/usr", "/usr"]  # fmt: skip
        for target, link in _USR_LINKS:
            if Path("/" + target).exists():
                args += ["--symlink", target, link]
        for name in _ETC:
            if Path("/etc", name).exists():
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        return args

    def run_prefix(
        self,
        workspace: Path,
        limits: SandboxLimits,
        procs: Path | None,
        read_only: tuple[str, ...] = (),
    ) -> list[str]:
        """The argv to put before the program (which must be an absolute path).

        ``read_only``: more host folders shown read-only at their own paths (a stdio
        MCP server's interpreter and code); shell steps pass none.
        """
        args = self.base_args()
        ws = str(workspace)
        private_tmp = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not the host's
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", private_tmp]
        for path in read_only:  # after the tmpfs, so a folder under /tmp is not hidden
            args += ["--ro-bind", path, path]
        args += ["--bind", ws, ws, "--chdir", ws, "--",
                 "/usr/bin/prlimit", f"--cpu={limits.cpu_s}", f"--as={limits.memory_bytes}",
                 f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}",
                 f"--nproc={limits.processes}", "--"]  # fmt: skip
        if procs is not None:
            args = [sys.executable, "-I", "-S", "-c", ENTER, str(procs), *args]
        return args

    def cgroup(self, limits: SandboxLimits) -> PidsCgroup | None:
        return None if self.pids is None else PidsCgroup(self.pids, limits.processes)


def _version(bwrap: str) -> str:
    done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10,
                          check=False)  # fmt: skip
    return done.stdout.strip().removeprefix("bubblewrap ").strip() or "unknown"


@cache
def find_sandbox(setting: str | None) -> Sandbox | str:
    """The sandbox this worker can use, or why there is none. ``setting``: the value of
    ``GATEHOUSE_BWRAP`` (None: ``bwrap`` on PATH; ``off``: none). Probed once: a
    program is really run in it."""
    if setting is not None and setting.strip().lower() == "off":
        return f"{BWRAP_ENV}=off: this worker runs no sandbox"
    bwrap = shutil.which(setting.strip() if setting else "bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if not Path("/usr/bin/prlimit").exists():
        return "prlimit (util-linux) is not installed"
    try:
        sandbox = Sandbox(bwrap, _version(bwrap), pids_root())
        with tempfile.TemporaryDirectory(prefix="gatehouse-probe-") as folder:
            probe = sandbox.run_prefix(Path(folder).resolve(), DEFAULT_LIMITS, None)
            done = subprocess.run(
                [*probe, "/usr/bin/true"], capture_output=True, text=True, timeout=20,
                check=False, env={"PATH": "/usr/bin:/bin"},
            )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not be run: {type(exc).__name__}: {exc}"
    if done.returncode != 0:
        reason = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[0][:300]
        return f"bubblewrap cannot create its namespaces here: {reason}"
    return sandbox


def current() -> Sandbox | str:
    return find_sandbox(os.environ.get(BWRAP_ENV))
