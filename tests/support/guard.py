"""A network guard: any TCP/UDP connection attempt from Python code on the
guarding thread is refused and recorded. (libpq, the PostgreSQL driver, connects
from C and is not seen.)

Only the thread that entered the guard is watched: what is guarded (a replay, an
explain) runs on the caller's thread and starts none of its own, while a worker
in the same test process keeps background threads (the notifier delivering to a
test receiver) whose connections are neither the guarded code's nor refused."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["network_guard"]


@contextmanager
def network_guard() -> Iterator[list[Any]]:
    """Yields the list of refused addresses; restores the socket module after."""
    attempts: list[Any] = []
    guarded = threading.get_ident()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto

    def _inet(sock: socket.socket) -> bool:
        watched = threading.get_ident() == guarded
        return watched and sock.family in (socket.AF_INET, socket.AF_INET6)

    def connect(self: socket.socket, address: Any) -> None:
        if _inet(self):
            attempts.append(address)
            raise ConnectionRefusedError(f"network guard: connect to {address!r} refused")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if _inet(self):
            attempts.append(address)
            return 111
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, *args: Any) -> int:
        if _inet(self):
            attempts.append(args[-1])
            raise ConnectionRefusedError("network guard: sendto refused")
        return real_sendto(self, *args)

    patched = {"connect": connect, "connect_ex": connect_ex, "sendto": sendto}
    originals = {"connect": real_connect, "connect_ex": real_connect_ex, "sendto": real_sendto}
    for name, fn in patched.items():
        setattr(socket.socket, name, fn)
    try:
        yield attempts
    finally:
        for name, fn in originals.items():
            setattr(socket.socket, name, fn)
