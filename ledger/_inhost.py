"""Workers of a SQLite database told of new work at once: datagrams within the host.

SQLite has no ``LISTEN``/``NOTIFY``, but every process that shares a SQLite file
shares its host. So each worker binds a Unix datagram socket (a ``WakeSocket``) in a
folder that belongs to the file (``wake_folder``), and whoever queues work for
workers (``ledger.work_queue.notify_work``) sends the queue partition's name to
every socket there once its transaction is over: the pool's check-in of the
connection, which comes after its commit (or rollback: the wake then finds
nothing new, and costs one claim pass). A send never waits: a socket whose
queue is full, or one left by a process that died (it is removed), is skipped;
the workers' fallback poll (``GATEHOUSE_QUEUE_POLL_S``) finds whatever a lost
datagram named.

The folder is in the system's temporary directory, named by the user and a
digest of the file's absolute path (a socket's path is limited to about 100
bytes, which a database's path need not be), and only its owner may use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import tempfile
from pathlib import Path

__all__ = ["WakeSocket", "after_transaction", "send_pending", "tell", "wake_folder"]

# Where a connection's pending wake-ups wait for the end of its transaction (its
# pool record's ``info``, shared by every checkout of the connection).
_PENDING = "gatehouse_wake"
_MAX_PAYLOAD = 1024
_BIND_ATTEMPTS = 3  # a folder removed under a bind is made again, this often


def wake_folder(url: str) -> Path | None:
    """The folder of the SQLite database ``url``'s workers' sockets (None: not a
    file database)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"gatehouse-wake-{os.getuid()}-{digest}"


def _own_folder(folder: Path) -> bool:
    """Make ``folder`` if missing; whether it is a folder of this user's alone."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = folder.lstat()
    return (
        stat.S_ISDIR(found.st_mode)
        and found.st_uid == os.getuid()
        and stat.S_IMODE(found.st_mode) & 0o077 == 0
    )


def after_transaction(info: dict[object, object], partition: str) -> None:
    """Note ``partition`` in a connection's ``info``, for its next check-in."""
    pending = info.setdefault(_PENDING, set())
    if isinstance(pending, set):
        pending.add(partition)


def send_pending(folder: Path, info: dict[object, object]) -> None:
    """Tell the workers what a connection's transaction queued (its check-in)."""
    pending = info.pop(_PENDING, None)
    if isinstance(pending, set) and pending:
        tell(folder, sorted(str(p) for p in pending))


_sender: socket.socket | None = None


def tell(folder: Path, partitions: list[str]) -> None:
    """Send each partition's name to every worker's socket in ``folder``; never waits,
    never raises (the fallback poll covers what is not delivered)."""
    global _sender  # noqa: PLW0603  (one unbound socket per process, made on first use)
    try:
        targets = [e.path for e in os.scandir(folder) if e.name.endswith(".sock")]
    except OSError:
        return  # no worker has bound a socket yet
    if not targets:
        return
    if _sender is None:
        made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        made.setblocking(False)
        _sender = made
    for target in targets:
        for partition in partitions:
            try:
                _sender.sendto(partition.encode()[:_MAX_PAYLOAD], target)
            except (ConnectionRefusedError, FileNotFoundError):
                # nobody listens there: a worker that died without removing it
                with contextlib.suppress(OSError):
                    Path(target).unlink()
                break
            except OSError:
                break  # its queue is full (that worker has plenty to claim), or worse


class WakeSocket:
    """One worker's socket in the wake folder (``bind``), heard with ``hear``."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{os.getpid()}-{os.urandom(4).hex()}.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            for attempt in range(_BIND_ATTEMPTS):
                if not _own_folder(folder):
                    raise PermissionError(f"{folder} is not a folder of this user's alone")
                try:
                    self._sock.bind(str(self.path))
                    break
                except FileNotFoundError:
                    # the last worker out removed the folder between its making and
                    # this bind (``close``): made again
                    if attempt == _BIND_ATTEMPTS - 1:
                        raise
        except BaseException:
            self._sock.close()
            raise

    def hear(self, timeout: float) -> set[str]:
        """The partitions named within ``timeout`` seconds (the first datagram waited
        for, the rest taken without waiting); empty when none came."""
        heard: set[str] = set()
        wait = timeout
        while True:
            if wait > 0:
                self._sock.settimeout(wait)
            else:
                self._sock.setblocking(False)
            try:
                heard.add(self._sock.recv(_MAX_PAYLOAD).decode(errors="replace"))
            except (TimeoutError, BlockingIOError):
                return heard
            wait = 0.0

    def close(self) -> None:
        self._sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):  # the last worker out leaves no folder
            self.path.parent.rmdir()
