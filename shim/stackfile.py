"""Where a running ``gatehouse up`` can be found from a second terminal.

``up`` writes ``<var>/stack.json`` once its shim answers (mode 0600: a database URL
may carry a password) and removes it when it stops: the database it runs on, the
shim's URL, its own pid and host. The client commands read ``./var/stack.json``
for their defaults (after the flag and the environment), so a second terminal in
the same folder reaches the stack the first one started, whatever database or
port it was given. A file left by a stack that died is ignored: its pid is gone
(checked where the host is this one; another host's file is never trusted).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "STACK_FILE",
    "RunningStack",
    "forget_stack",
    "note_stack",
    "process_alive",
    "running_stack",
]

STACK_FILE = "stack.json"
DEFAULT_VAR = Path("var")


@dataclass(frozen=True)
class RunningStack:
    database_url: str
    url: str  # the shim's base URL, as up printed it
    pid: int
    file: Path  # where it was read from, to name as the source


def note_stack(var_dir: Path, database_url: str, url: str) -> Path:
    """Write this process's stack file (``up``, once its shim answers)."""
    path = var_dir / STACK_FILE
    body = {
        "database_url": database_url,
        "url": url,
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(body, out)
    return path


def forget_stack(var_dir: Path) -> None:
    """Remove the stack file if it is this process's (``up``, as it stops)."""
    path = var_dir / STACK_FILE
    found = _read(path)
    if found is not None and found.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, object] | None:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def process_alive(pid: int) -> bool:
    """A process of this host with that pid exists (whoever's it is)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it is there
    return True


def running_stack(var_dir: Path = DEFAULT_VAR) -> RunningStack | None:
    """The stack ``gatehouse up`` runs from this folder now, or None (no file, a file
    of another host, of a process that is gone, or one that does not parse)."""
    path = var_dir / STACK_FILE
    body = _read(path)
    if body is None or body.get("host") != socket.gethostname():
        return None
    pid, database_url, url = body.get("pid"), body.get("database_url"), body.get("url")
    if not (isinstance(pid, int) and isinstance(database_url, str) and isinstance(url, str)):
        return None
    if not process_alive(pid):
        return None
    return RunningStack(database_url=database_url, url=url, pid=pid, file=path)
