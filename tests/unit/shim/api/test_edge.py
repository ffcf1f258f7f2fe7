"""The edge of the served shim, without a database: which address a request comes
from, the deadline on a request head, and how the shim is served.

The head deadline is checked on a real socket against uvicorn serving a trivial app
with the shim's protocol: a head sent a byte at a time is cut off, a prompt one is
answered, and so is the next one on the same connection.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.importer import import_from_string

from shim.api import serving
from shim.api.edge import client_address
from shim.local import shim_command
from shim.settings import Proxies, ShimSettings, parse_proxies, read_header_timeout

# --- the client address ------------------------------------------------------------

LOOPBACK = parse_proxies("127.0.0.1")
PROXIES = parse_proxies("10.0.0.0/8, 192.168.1.1, ::1")


@pytest.mark.parametrize(
    ("peer", "forwarded", "proxies", "expected"),
    [
        # no proxy configured: the peer, whatever it sends, from loopback or not
        ("127.0.0.1", ["6.6.6.6"], (), "127.0.0.1"),
        ("::1", ["6.6.6.6"], (), "::1"),
        ("203.0.113.9", ["6.6.6.6, 7.7.7.7"], (), "203.0.113.9"),
        # a peer that is not a configured proxy: its header is not believed
        ("203.0.113.9", ["6.6.6.6"], PROXIES, "203.0.113.9"),
        ("127.0.0.1", ["6.6.6.6"], PROXIES, "127.0.0.1"),
        # a trusted peer: the nearest address that is not a proxy
        ("127.0.0.1", ["6.6.6.6"], LOOPBACK, "6.6.6.6"),
        ("10.1.2.3", ["6.6.6.6"], PROXIES, "6.6.6.6"),
        ("10.1.2.3", ["1.1.1.1, 6.6.6.6"], PROXIES, "6.6.6.6"),  # 1.1.1.1 is forged
        ("10.1.2.3", ["1.1.1.1, 6.6.6.6, 10.9.9.9"], PROXIES, "6.6.6.6"),
        ("10.1.2.3", ["1.1.1.1", "6.6.6.6, 10.9.9.9"], PROXIES, "6.6.6.6"),  # two headers
        ("::1", ["2001:db8::7"], PROXIES, "2001:db8::7"),
        ("::ffff:10.1.2.3", ["6.6.6.6"], PROXIES, "6.6.6.6"),  # v4 written as v6
        ("10.1.2.3", ["6.6.6.6:4711"], PROXIES, "6.6.6.6"),
        ("10.1.2.3", ["[2001:db8::7]:4711"], PROXIES, "2001:db8::7"),
        # every hop a proxy: the farthest one
        ("10.1.2.3", ["10.4.4.4, 192.168.1.1"], PROXIES, "10.4.4.4"),
        # no header, or nothing usable in it: the peer, or the last proxy known
        ("10.1.2.3", [], PROXIES, "10.1.2.3"),
        ("10.1.2.3", [" , "], PROXIES, "10.1.2.3"),
        ("10.1.2.3", ["not-an-address"], PROXIES, "10.1.2.3"),
        ("10.1.2.3", ["6.6.6.6, unknown, 10.9.9.9"], PROXIES, "10.9.9.9"),
        ("10.1.2.3", ["\u0661.1.1.1"], PROXIES, "10.1.2.3"),  # Arabic-Indic digit
        # a peer that is no address at all (a test client's name)
        ("testclient", ["6.6.6.6"], LOOPBACK, "testclient"),
    ],
)
def test_the_client_address_believes_only_configured_proxies(
    peer: str, forwarded: list[str], proxies: Proxies, expected: str
) -> None:
    assert client_address(peer, forwarded, proxies) == expected


def test_a_long_forged_chain_is_not_followed_to_its_start() -> None:
    chain = ", ".join(["10.0.0.1"] * 5000 + ["6.6.6.6"])
    assert client_address("10.1.2.3", [f"9.9.9.9, {chain}"], PROXIES) == "6.6.6.6"
    every_hop_a_proxy = ", ".join(["9.9.9.9", *["10.0.0.1"] * 5000])
    assert client_address("10.1.2.3", [every_hop_a_proxy], PROXIES) == "10.0.0.1"


def test_trusted_proxies_setting() -> None:
    base = {"GATEHOUSE_DATABASE_URL": "sqlite:///x.sqlite"}
    assert ShimSettings.from_env(base).trusted_proxies == ()
    settings = ShimSettings.from_env({**base, "GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, ::1"})
    assert [str(n) for n in settings.trusted_proxies] == ["10.0.0.0/8", "::1/128"]
    with pytest.raises(Exception, match="GATEHOUSE_TRUSTED_PROXIES"):
        ShimSettings.from_env({**base, "GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, *"})
    assert ShimSettings.from_env(base).header_timeout_s == 10.0
    assert read_header_timeout({"GATEHOUSE_HEADER_TIMEOUT_S": "0.5"}) == 0.5
    assert ShimSettings.from_env(base).max_event_streams == 20


# --- how the shim is served -------------------------------------------------------


def test_the_served_shim_reads_forwarded_headers_only_in_the_app() -> None:
    """uvicorn believes X-Forwarded-For from loopback unless told not to: every way the
    shim is served turns that off and speaks the protocol with the head deadline."""
    for argv in (
        shim_command("127.0.0.1", 8000, None, log_level=None),
        shim_command("0.0.0.0", 8000, None, log_level="warning", processes=3),
    ):
        assert "--no-proxy-headers" in argv
        assert "--proxy-headers" not in argv and "--forwarded-allow-ips" not in argv
        protocol = argv[argv.index("--http") + 1]
        assert import_from_string(protocol) is serving.HeadTimeoutH11
    assert serving.HeadTimeoutH11.head_timeout_s == read_header_timeout(os.environ)


# --- the head deadline --------------------------------------------------------------


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


@contextmanager
def _served(head_timeout_s: float) -> Iterator[tuple[str, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        _hello,
        log_level="warning",
        lifespan="off",
        http=serving.head_timeout_protocol(head_timeout_s),
        timeout_keep_alive=60,  # far past the head deadline: the deadline is what cuts
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _closed(conn: socket.socket) -> bool:
    """Whether the server closed ``conn`` (b"" or a reset) before the test's own bound."""
    conn.settimeout(20)  # a bound for the test not to hang, not a measurement
    try:
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                return True
            if b"HTTP/1.1" in chunk:
                return False  # answered: the head was taken
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


SLOW_HEAD = b"GET / HTTP/1.1\r\nHost: shim\r\nX-Slow: " + b"a" * 200


def _drip(conn: socket.socket, data: bytes, stop: threading.Event) -> None:
    """A byte every 50 ms until the server closes the connection (a slow-header client)."""
    for byte in data:
        if stop.is_set():
            return
        try:
            conn.send(bytes([byte]))
        except OSError:
            return
        time.sleep(0.05)


@pytest.mark.parametrize("first", [False, True], ids=["fresh", "after-an-answer"])
def test_a_head_sent_byte_by_byte_is_cut_off(first: bool) -> None:
    """A slow head: cut off (the server closes without an answer), both on a new
    connection and on one kept alive after an answer, though bytes keep coming."""
    with _served(0.5) as address, socket.create_connection(address) as conn:
        if first:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: shim\r\n\r\n")
            assert _answer(conn).startswith(b"HTTP/1.1 200")
        stop = threading.Event()
        dripping = threading.Thread(target=_drip, args=(conn, SLOW_HEAD, stop))
        dripping.start()
        try:
            assert _closed(conn)
        finally:
            stop.set()
            dripping.join(30)


def test_a_prompt_head_is_answered_and_so_is_the_next() -> None:
    with _served(0.5) as address, socket.create_connection(address) as conn:
        for _ in range(2):
            conn.sendall(b"GET / HTTP/1.1\r\nHost: shim\r\n\r\n")
            assert _answer(conn).startswith(b"HTTP/1.1 200")


def _answer(conn: socket.socket) -> bytes:
    conn.settimeout(20)
    got = b""
    while not got.endswith(b"hello"):
        chunk = conn.recv(4096)
        assert chunk, "closed before the answer"
        got += chunk
    return got
