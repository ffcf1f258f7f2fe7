"""The test's network: a loopback canary, a stand-in public server, a resolver, a wire.

* :class:`Canary` is the forbidden target: HTTP servers on ``127.0.0.1`` and, when
  the machine has it, ``::1`` on the same port. They record every connection they
  accept and every request they read; an SSRF payload has worked if either list grows.
* :class:`PublicServer` listens on loopback too, but is only ever reached as
  :data:`PUBLIC_IP`, a global address: the wire (below) routes connections for that
  address to it. So the tool pools of the attacks name no destination that allows
  private addresses, and the policy judges a genuinely public address.
* :class:`Resolver` replaces ``socket.getaddrinfo``: names come from a script (a
  list of answers, one per lookup, the last repeated), numeric hosts go to the real
  resolver with ``AI_NUMERICHOST`` (so glibc's reading of ``2130706433`` or
  ``0x7f.1`` is the real one), and every other name does not exist. It treats a
  trailing dot as the root and ``localhost`` as loopback, as a lenient resolver would.
* :class:`Wire` replaces ``socket.socket.connect`` on the test's thread: it logs
  every address the handler connects to, sends :data:`PUBLIC_IP` to the public
  server, lets loopback and unspecified addresses through (that is how a broken
  check would reach the canary) and answers ``ENETUNREACH`` for anything else, so
  nothing leaves the machine even where a network exists.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["PUBLIC_IP", "Canary", "PublicServer", "Resolver", "Wire", "serving"]

PUBLIC_IP = "93.184.216.34"  # global (example.com's, once); only the wire routes it
LOOPBACK = ("127.0.0.1", "::1")

Answer = list[str]


@dataclass
class Seen:
    """What one server saw: accepted connections (peer addresses) and requests."""

    connections: list[str] = field(default_factory=list)
    requests: list[dict[str, str]] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every request thread
    seen: Seen
    canary_port: int

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.seen.connections.append(str(client_address[0]))
        return True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Recorder(BaseHTTPRequestHandler):
    """Records the request, then answers from :meth:`reply`."""

    server: _Server
    timeout = 5  # a connection that never sends a request cannot hold server_close()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = {":method": self.command, ":path": self.path, ":body": body.decode("latin-1")}
        self.server.seen.requests.append(seen | {k.lower(): v for k, v in self.headers.items()})
        status, headers, payload = self.reply(body)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def reply(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/plain"}, b"canary reached"

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def redirect_target(form: str, canary_port: int) -> str:
    """Where a redirect of the given form points: the canary, or back to the server."""
    c = canary_port
    targets = {
        "absolute": f"http://127.0.0.1:{c}/pwned",
        "absolute-v6": f"http://[::1]:{c}/pwned",
        "mapped": f"http://[::ffff:127.0.0.1]:{c}/pwned",
        "localhost": f"http://localhost:{c}/pwned",
        "unspecified": f"http://0.0.0.0:{c}/pwned",
        "decimal": f"http://2130706433:{c}/pwned",
        "metadata": "http://169.254.169.254/latest/meta-data/",
        "userinfo": f"http://allowed.test@127.0.0.1:{c}/pwned",
        "scheme-relative": f"//127.0.0.1:{c}/pwned",
        "backslash": f"/\\127.0.0.1:{c}/pwned",  # browsers read it as scheme-relative
        "relative": "/pwned",
        "dot-relative": "../../pwned",
    }
    return targets[form]


class _Public(_Recorder):
    """``/ok``; ``/redirect/<status>/<form>``; ``/refresh/<form>``; ``/meta/<form>``."""

    def reply(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        text = {"Content-Type": "text/plain"}
        if parts == ["ok"]:
            return 200, text, b"public ok"
        if parts[0] == "echo":
            return 200, {"Content-Type": "application/json"}, body
        if len(parts) == 3 and parts[0] == "redirect":
            target = redirect_target(parts[2], self.server.canary_port)
            return int(parts[1]), text | {"Location": target}, b"moved"
        if len(parts) == 2 and parts[0] == "refresh":
            target = redirect_target(parts[1], self.server.canary_port)
            return 200, text | {"Refresh": f"0; url={target}"}, b"refresh"
        if len(parts) == 2 and parts[0] == "meta":
            target = redirect_target(parts[1], self.server.canary_port)
            html = f'<meta http-equiv="refresh" content="0; url={target}">'
            return 200, {"Content-Type": "text/html"}, html.encode()
        return 404, text, b"no such page"


@contextmanager
def serving(server: _Server) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Canary:
    port: int
    v6: bool
    seen: Seen

    def hits(self) -> int:
        return len(self.seen.connections) + len(self.seen.requests)


def bind_canary() -> tuple[list[_Server], Canary]:
    """Canary servers on 127.0.0.1 and (if possible) ::1, sharing one port."""
    seen = Seen()
    for _ in range(20):
        v4 = _Server(("127.0.0.1", 0), _Recorder)
        v4.seen = seen
        port = v4.server_address[1]
        try:
            v6 = _Server6(("::1", port), _Recorder)
        except OSError as exc:
            v4.server_close()
            if exc.errno == errno.EADDRINUSE:
                continue
            break  # no IPv6 on this machine
        v6.seen = seen
        return [v4, v6], Canary(port, True, seen)
    v4 = _Server(("127.0.0.1", 0), _Recorder)
    v4.seen = seen
    return [v4], Canary(v4.server_address[1], False, seen)


@dataclass
class PublicServer:
    port: int
    seen: Seen


def bind_public(canary_port: int) -> tuple[_Server, PublicServer]:
    server = _Server(("127.0.0.1", 0), _Public)
    server.seen = Seen()
    server.canary_port = canary_port
    return server, PublicServer(server.server_address[1], server.seen)


class Resolver:
    """A scripted ``getaddrinfo``; see the module docstring."""

    def __init__(self, public_names: dict[str, Answer]) -> None:
        self.real = socket.getaddrinfo
        self.script: dict[str, list[Answer]] = {
            "localhost": [list(LOOPBACK)],
            "localhost.localdomain": [list(LOOPBACK)],
            "ip6-localhost": [["::1"]],
        }
        self.script |= {name: [answer] for name, answer in public_names.items()}
        self.lookups: list[str] = []

    def __call__(
        self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[tuple[Any, ...]]:
        name = host.decode("ascii") if isinstance(host, bytes) else str(host)
        key = name.lower()
        key = key[:-1] if key.endswith(".") else key
        port_number = int(port or 0)
        if key in self.script:
            answers = self.script[key]
            answer = answers[min(self.lookups.count(key), len(answers) - 1)]
            self.lookups.append(key)
            infos = [self._info(address, port_number) for address in answer]
            return [i for i in infos if family in (0, i[0])]
        self.lookups.append(key)
        try:
            return self.real(key, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, f"{name!r}: no such name") from None

    @staticmethod
    def _info(address: str, port: int) -> tuple[Any, ...]:
        stream, tcp = socket.SOCK_STREAM, socket.IPPROTO_TCP
        if ":" in address:
            return (socket.AF_INET6, stream, tcp, "", (address, port, 0, 0))
        return (socket.AF_INET, stream, tcp, "", (address, port))


class Wire:
    """A patched ``socket.socket.connect``; see the module docstring."""

    def __init__(self, public_port: int) -> None:
        self.public_port = public_port
        self.thread = threading.get_ident()
        self.real = socket.socket.connect
        self.log: list[tuple[str, int]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        wire = self

        def connect(sock: socket.socket, address: Any) -> None:
            watched = sock.family in (socket.AF_INET, socket.AF_INET6)
            if not watched or threading.get_ident() != wire.thread:
                wire.real(sock, address)
                return
            host, port = str(address[0]), int(address[1])
            wire.log.append((host, port))
            ip = ipaddress.ip_address(host.split("%", 1)[0])
            if str(ip) == PUBLIC_IP and sock.family == socket.AF_INET:
                wire.real(sock, ("127.0.0.1", wire.public_port))
                return
            mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
            if ip.is_loopback or ip.is_unspecified or (mapped is not None and mapped.is_loopback):
                wire.real(sock, address)  # where a broken check would reach the canary
                return
            raise OSError(errno.ENETUNREACH, f"the test network has no route to {host}")

        monkeypatch.setattr(socket.socket, "connect", connect)

    def reached_only_public(self) -> bool:
        return all(host == PUBLIC_IP for host, _ in self.log)
