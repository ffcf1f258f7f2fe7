"""The process tree, read from ``/proc`` (Linux): who a process's children are."""

from __future__ import annotations

from pathlib import Path

__all__ = ["children", "descendants"]


def _parents() -> dict[int, int]:
    """Each live process's parent, by process id."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while the tree was read
        found[int(entry.name)] = int(stat[1])
    return found


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    return sorted(child for child, parent in _parents().items() if parent == pid)


def descendants(pid: int) -> set[int]:
    """``pid`` and every live process below it."""
    parents = _parents()
    tree, grew = {pid}, True
    while grew:
        below = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return tree
