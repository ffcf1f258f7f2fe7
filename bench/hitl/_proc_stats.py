"""CPU time and resident memory of processes, read from ``/proc`` (Linux).

The side-by-side report charges each system the CPU its own processes used
(and its database's PostgreSQL backends', over the same window), so a throughput figure
on a 2-core machine can be explained by where the cores went.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.procs import descendants

__all__ = ["cpu_s", "postgres_cpu_s", "postgres_server_cpu_s", "rss_mib", "tree_cpu_s"]

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process has used (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_s(pid: int) -> float:
    """``cpu_s`` of a live process and of every live process below it (a shim served by
    several uvicorn processes: the parent and its workers)."""
    return sum(cpu_s(p) for p in descendants(pid))


def postgres_cpu_s(database: str) -> float:
    """CPU seconds of the PostgreSQL backends now connected to ``database`` (their
    process title names it). Backends come and go: compare two readings only over a
    window in which the system keeps its connections open."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").split()
        except OSError:
            continue
        if title[:1] == [b"postgres:"] and database.encode() in title[1:5]:
            total += cpu_s(int(entry.name))
    return total


def postgres_server_cpu_s() -> float:
    """CPU seconds of the whole local PostgreSQL server: its postmaster, every live
    child and every child already gone (the kernel adds a reaped child's CPU to its
    parent's ``cutime``/``cstime``). Counts backends a pool closed mid-window, which
    ``postgres_cpu_s`` loses, and whatever else the server did meanwhile."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, fields = stat.split("(", 1)[1].rsplit(")", 1)[0], stat.rsplit(")", 1)[1].split()
        if name == "postgres" and _is_root(fields):
            own = sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
            return own + sum(cpu_s(child) for child in _children(int(entry.name)))
    return 0.0


def _is_root(fields: list[str]) -> bool:
    """A postgres process whose parent is not postgres: the postmaster."""
    try:
        parent = Path(f"/proc/{fields[1]}/stat").read_text()
    except OSError:
        return True
    return parent.split("(", 1)[1].rsplit(")", 1)[0] != "postgres"


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def rss_mib(pid: int) -> float:
    """Resident set size of a live process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
