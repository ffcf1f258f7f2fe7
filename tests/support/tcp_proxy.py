"""A TCP proxy on loopback whose faults a test switches at run time.

Debian has no toxiproxy; this is the part of it the chaos suite needs, on an
asyncio loop in a thread of its own::

    with TcpProxy("127.0.0.1", pg.port) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        proxy.latency(0.05)  # every chunk, each way, held 50 ms
        proxy.drop_all()  # every connection reset now (RST), mid-transaction or not
        proxy.black_hole()  # nothing forwarded, nothing answered, nothing closed
        proxy.partition()  # new connections refused, open ones reset
        proxy.heal()  # pass-through again

The modes:

* **pass-through** -- bytes forwarded as they come.
* **latency** -- each chunk read is held ``delay_s`` before it is forwarded.
* **black hole** -- every connection, open or new, is accepted and kept open;
  what the client sends is read and thrown away, nothing reaches the server,
  nothing comes back, and a server closing its end is not passed on. A
  connection caught in a black hole stays in it after :meth:`heal` (as after a
  failover, or a firewall that forgot the flow): only its client can end it,
  and the proxy notes when it does (:attr:`ProxyStats.black_holed_closed`).
* **partition** -- the listening socket is closed (a new connection is
  refused) and every open one is reset; :meth:`heal` listens again.

:meth:`drop_all` resets every open connection at once, whatever the mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

__all__ = ["Mode", "ProxyStats", "TcpProxy"]

_CHUNK = 65536
_T = TypeVar("_T")


class Mode(StrEnum):
    PASS = "pass"
    LATENCY = "latency"
    BLACK_HOLE = "black_hole"
    PARTITION = "partition"


@dataclass
class ProxyStats:
    """What the proxy saw, counted (a copy; see :meth:`TcpProxy.stats`)."""

    accepted: int = 0  # connections accepted from clients
    upstream_failed: int = 0  # accepted, but the server could not be reached
    dropped: int = 0  # reset by drop_all or a partition
    black_holed: int = 0  # caught in a black hole (open then, or opened during it)
    black_holed_closed: int = 0  # of those, closed by their client
    # For each black-holed connection its client closed: seconds from being caught to closing.
    black_hole_lifetimes_s: list[float] = field(default_factory=list)
    delayed_chunks: int = 0
    discarded_bytes: int = 0
    forwarded_bytes: int = 0
    faults: dict[str, int] = field(default_factory=dict)  # mode switches and drops, by name


class _Link:
    """One client connection and, unless black-holed from the start, its server side."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.black_holed_at: float | None = None
        self.closed = False


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close with RST (SO_LINGER 0), not FIN: the peer sees the connection torn down."""
    if writer is None or writer.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        self._mode = Mode.PASS
        self._delay_s = 0.0
        self._links: set[_Link] = set()
        self._stats = ProxyStats()
        self._lock = threading.Lock()  # guards _stats for readers in other threads
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tcp-proxy", daemon=True
        )

    # ------------------------------------------------------------ lifetime
    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ control (any thread)
    @property
    def mode(self) -> Mode:
        return self._mode

    def pass_through(self) -> None:
        self._call(self._switch(Mode.PASS, 0.0))

    def latency(self, delay_s: float) -> None:
        self._call(self._switch(Mode.LATENCY, delay_s))

    def black_hole(self) -> int:
        """Swallow everything from now on; how many open connections it caught."""
        return self._call(self._black_hole())

    def partition(self) -> int:
        """Refuse new connections and reset the open ones; how many were reset."""
        return self._call(self._partition())

    def heal(self) -> None:
        """Pass-through again (listening again after a partition)."""
        self._call(self._switch(Mode.PASS, 0.0))

    def drop_all(self) -> int:
        """Reset every open connection now (black-holed ones stay); how many."""
        return self._call(self._drop_all("drop"))

    def stats(self) -> ProxyStats:
        with self._lock:
            s = self._stats
            return ProxyStats(
                accepted=s.accepted,
                upstream_failed=s.upstream_failed,
                dropped=s.dropped,
                black_holed=s.black_holed,
                black_holed_closed=s.black_holed_closed,
                black_hole_lifetimes_s=list(s.black_hole_lifetimes_s),
                delayed_chunks=s.delayed_chunks,
                discarded_bytes=s.discarded_bytes,
                forwarded_bytes=s.forwarded_bytes,
                faults=dict(s.faults),
            )

    def open_connections(self) -> int:
        return self._call(self._count_open())

    # ------------------------------------------------------------ the loop's side
    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self._stats, name, getattr(self._stats, name) + n)

    def _fault(self, name: str) -> None:
        with self._lock:
            self._stats.faults[name] = self._stats.faults.get(name, 0) + 1

    async def _count_open(self) -> int:
        return sum(1 for link in self._links if not link.closed)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _switch(self, mode: Mode, delay_s: float) -> None:
        if mode is not Mode.PASS:
            self._fault(str(mode))
        self._mode, self._delay_s = mode, delay_s
        if self._server is None:
            await self._listen()

    async def _black_hole(self) -> int:
        await self._switch(Mode.BLACK_HOLE, 0.0)
        caught = 0
        for link in list(self._links):
            if not link.closed and link.black_holed_at is None:
                self._catch(link)
                caught += 1
        return caught

    def _catch(self, link: _Link) -> None:
        link.black_holed_at = time.monotonic()
        self._count("black_holed")

    async def _partition(self) -> int:
        self._fault("partition")
        self._mode = Mode.PARTITION
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        return await self._drop_all(None)

    async def _drop_all(self, fault: str | None) -> int:
        if fault is not None:
            self._fault(fault)
        dropped = 0
        for link in list(self._links):
            if link.closed or link.black_holed_at is not None:
                continue
            link.closed = True
            _reset(link.client)
            _reset(link.server)
            dropped += 1
        self._count("dropped", dropped)
        return dropped

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for link in list(self._links):
            link.closed = True
            _reset(link.client)
            _reset(link.server)
        self._links.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count("accepted")
        link = _Link(writer)
        self._links.add(link)
        try:
            if self._mode is Mode.BLACK_HOLE:
                self._catch(link)
                await self._pump(link, reader, None)
                return
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(*self.upstream), timeout=10
                )
            except (OSError, TimeoutError):
                self._count("upstream_failed")
                _reset(writer)
                return
            link.server = up_writer
            if link.closed:  # dropped while connecting
                _reset(up_writer)
                return
            await asyncio.gather(
                self._pump(link, reader, up_writer),
                self._pump(link, up_reader, writer, from_server=True),
            )
        finally:
            self._links.discard(link)
            link.closed = True
            _reset(link.server)
            with contextlib.suppress(Exception):
                writer.close()

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None,
        from_server: bool = False,
    ) -> None:
        """Copy one direction until EOF; in a black hole, read and throw away."""
        while not link.closed:
            try:
                chunk = await reader.read(_CHUNK)
            except OSError:
                chunk = b""
            if link.black_holed_at is not None:
                if chunk:
                    self._count("discarded_bytes", len(chunk))
                    continue
                if from_server:
                    # The server's end closed: in a black hole, the client never hears of it.
                    return
                # The client closed a connection it could get nothing from: it noticed.
                with self._lock:
                    self._stats.black_holed_closed += 1
                    self._stats.black_hole_lifetimes_s.append(
                        round(time.monotonic() - link.black_holed_at, 2)
                    )
                link.closed = True
                return
            if not chunk:
                # One end closed: close the other (which ends the other direction's read).
                link.closed = True
                if writer is not None:
                    writer.close()
                return
            if self._mode is Mode.LATENCY and self._delay_s > 0:
                self._count("delayed_chunks")
                await asyncio.sleep(self._delay_s)
                if link.black_holed_at is not None or link.closed:
                    self._count("discarded_bytes", len(chunk))
                    continue
            if writer is None:
                continue
            try:
                writer.write(chunk)
                await writer.drain()
            except OSError:
                link.closed = True
                return
            self._count("forwarded_bytes", len(chunk))
