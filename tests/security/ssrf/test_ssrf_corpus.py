"""SSRF attempts through the real http handler, counted by a loopback canary.

Every entry of :data:`ATTEMPTS` is one ``worker.handlers.http.run`` of an envelope
whose URL aims at the canary (127.0.0.1 and ::1) by some road: a literal address,
another spelling, an IPv6 address carrying 127.0.0.1, parser confusion, a proxy in
the environment, DNS answers that change between the check and the connection, or
an allowlisted public server that redirects. The tool pool is wide on purpose: it
names ``allowed.test``, ``rebind.test``, the public address and the URL's own host
(the allowlist mistake), any port, and none of them allows private addresses. So
the address check, the pinning and the refusal of redirects are what is tried.

After each attempt: the canary saw no connection and no request, the wire saw no
connection to any address but the checked public one, and the outcome is the one
the table says. The controls show the same handler, pool and network succeed where
they should, so the refusals are not a broken handler.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError

from contracts import (
    Connector,
    Destination,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Limits,
)
from contracts.execution import ExecutionResult
from tests.security.ssrf._attempts import ATTEMPTS, FAMILIES, NAMES, Attempt
from tests.security.ssrf._net import (
    PUBLIC_IP,
    Canary,
    PublicServer,
    Resolver,
    Wire,
    bind_canary,
    bind_public,
    serving,
)
from tests.support.handler_context import handler_context
from worker.coordinator.envelopes import build_envelope
from worker.handlers import http as http_handler

OP_KEY = "cd" * 32
RAN: list[str] = []


@dataclass
class Net:
    canary: Canary
    public: PublicServer
    probes: int


@dataclass
class World:
    net: Net
    resolver: Resolver
    wire: Wire
    before: int  # the canary's count when the test began (it should stay 0)

    def new_canary_hits(self) -> int:
        return self.net.canary.hits() - self.before


def _probe(host: str, port: int) -> None:
    """One plain request to the canary: it is listening, and it counts what it gets."""
    connection = http.client.HTTPConnection(host, port, timeout=5)
    try:
        connection.request("GET", "/probe")
        assert connection.getresponse().read() == b"canary reached"
    finally:
        connection.close()


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    threads_before = set(threading.enumerate())
    servers, canary = bind_canary()
    public_server, public = bind_public(canary.port)
    with ExitStack() as stack:
        for server in [public_server, *servers]:
            stack.enter_context(serving(server))
        hosts = ["127.0.0.1", "::1"] if canary.v6 else ["127.0.0.1"]
        for host in hosts:
            _probe(host, canary.port)
        assert len(canary.seen.requests) == len(canary.seen.connections) == len(hosts)
        canary.seen.requests.clear()
        canary.seen.connections.clear()
        yield Net(canary, public, len(hosts))
    assert set(threading.enumerate()) <= threads_before, "a server thread outlived the module"


@pytest.fixture
def world(net: Net, monkeypatch: pytest.MonkeyPatch) -> World:
    resolver = Resolver({"allowed.test": [PUBLIC_IP]} | NAMES)
    monkeypatch.setattr("socket.getaddrinfo", resolver)
    wire = Wire(net.public.port)
    wire.install(monkeypatch)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    net.public.seen.requests.clear()
    net.public.seen.connections.clear()
    return World(net, resolver, wire, net.canary.hits())


def _own_destination(url: str) -> Destination | None:
    """The URL's own host as the policy reads it, allowlisted: the mistake under test."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not host or scheme not in ("http", "https"):
        return None
    try:
        return Destination(scheme=scheme, host=f"[{host}]" if ":" in host else host)
    except ValidationError:
        return None


def attack_pool(url: str) -> list[Destination]:
    pool = [Destination(scheme="http", host=h) for h in ("allowed.test", "rebind.test", PUBLIC_IP)]
    own = _own_destination(url)
    if own is not None and own not in pool:
        pool.append(own)
    assert not any(d.allow_private for d in pool)
    return pool


def send(
    workspace: Path, destinations: list[Destination], url: str, method: str = "GET"
) -> ExecutionResult:
    connector = Connector(
        connector_id="web",
        driver_kind=DriverKind.HTTP,
        description="ssrf corpus",
        limits=Limits(timeout_s=5.0, max_output_bytes=65536),
        destinations=destinations,
    )
    arguments: JsonObject = {"url": url, "method": method}
    if method == "POST":
        arguments["json"] = {"x": 1}
    envelope = build_envelope(
        run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
        connector=connector, arguments=arguments,
    ).bound(workspace)  # fmt: skip
    return http_handler.run(envelope, handler_context())


@pytest.mark.parametrize("name", list(ATTEMPTS))
def test_ssrf_attempt_never_reaches_the_canary(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    attempt: Attempt = ATTEMPTS[name]
    port = world.net.canary.port
    url = attempt.target(port)
    for key, value in attempt.env.items():
        monkeypatch.setenv(key, value.replace("{c}", str(port)))
    if attempt.rebind:
        world.resolver.script["rebind.test"] = [list(answer) for answer in attempt.rebind]
    RAN.append(name)
    try:
        result = send(tmp_path, attack_pool(url), url, attempt.method)
    except GatehouseError as exc:
        assert exc.code is ErrorCode.DESTINATION_NOT_ALLOWED
        outcome: str | int = "refused"
    else:
        status = result.output.get("status")
        outcome = status if isinstance(status, int) else "failed"
        if outcome == "failed":
            assert result.status != "success"

    assert world.new_canary_hits() == 0, world.net.canary.seen
    assert world.wire.reached_only_public(), world.wire.log
    assert outcome == attempt.expect, (outcome, attempt.expect)
    public = world.net.public.seen.requests
    if isinstance(attempt.expect, int):
        assert len(public) == 1, public  # the redirect was not followed, not even home
        assert public[0][":method"] == attempt.method
    else:
        assert public == []
    if attempt.expect == "refused":
        assert world.wire.log == []  # refused before any connection
    if attempt.rebind and attempt.expect == 200:
        assert world.resolver.lookups.count("rebind.test") == 1  # pinned: never asked again
        assert public[0]["host"] == f"rebind.test:{port}"


CONTROLS = ["loopback allowed", "loopback allowed, POST", "public name", "public address",
            "rebind.test answering public"]  # fmt: skip


@pytest.mark.parametrize("name", CONTROLS)
def test_allowlisted_controls_succeed(world: World, tmp_path: Path, name: str) -> None:
    port = world.net.public.port
    loopback = Destination(scheme="http", host="127.0.0.1", ports=[port], allow_private=True)
    pool = attack_pool("http://allowed.test/")
    method = "POST" if "POST" in name else "GET"
    url, host = {
        "loopback allowed": (f"http://127.0.0.1:{port}/ok", f"127.0.0.1:{port}"),
        "loopback allowed, POST": (f"http://127.0.0.1:{port}/echo", f"127.0.0.1:{port}"),
        "public name": ("http://allowed.test:8080/ok", "allowed.test:8080"),
        "public address": (f"http://{PUBLIC_IP}/ok", PUBLIC_IP),
        "rebind.test answering public": ("http://rebind.test/ok", "rebind.test"),
    }[name]
    world.resolver.script["rebind.test"] = [[PUBLIC_IP]]
    result = send(tmp_path, [*pool, loopback] if "loopback" in name else pool, url, method)
    assert result.status == "success", result.error
    assert result.output["status"] == 200
    expected = {"x": 1} if method == "POST" else None
    assert result.output.get("json") == expected
    assert result.output.get("text", "public ok") == "public ok"
    [seen] = world.net.public.seen.requests
    assert seen["host"] == host
    assert world.new_canary_hits() == 0


def test_the_corpus_is_large_and_the_canary_untouched(net: Net) -> None:
    """The figure in docs/security.md: the corpus size, and 0 requests at the canary."""
    assert len(ATTEMPTS) >= 60
    assert set(FAMILIES) >= {"literal", "ipv4 spelling", "ipv6 embedding", "zone id",
                             "userinfo", "unicode", "control character", "dns rebinding",
                             "redirect"}  # fmt: skip
    assert net.probes >= 1  # the canary counted the probes before it was cleared
    assert net.canary.hits() == 0, net.canary.seen
    if len(RAN) == len(ATTEMPTS):  # the whole corpus ran in this session
        assert sorted(RAN) == sorted(ATTEMPTS)
