"""Unit tests for the noop and http handlers (no database).

The http handler talks to a real ThreadingHTTPServer on 127.0.0.1. The
restricted_shell handler's tests are in ``test_handler_shell``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    Connector,
    Destination,
    DriverKind,
    ErrorCode,
    GatehouseError,
)
from tests.unit.worker.handlers.handler_cases import OP_KEY
from tests.unit.worker.handlers.handler_cases import Ctx as _Ctx
from tests.unit.worker.handlers.handler_cases import assert_failed as _assert_failed
from tests.unit.worker.handlers.handler_cases import ctx as _ctx
from tests.unit.worker.handlers.handler_cases import run as _run
from worker.coordinator.executor import Delivered
from worker.handlers import Artifact, noop
from worker.handlers import http as http_handler

BIG = b"x" * 10_000


JSON_BODY = b'{"a": 1, "b": [true, null]}'
ROUTES: dict[str, tuple[int, bytes, str]] = {
    "/json": (200, JSON_BODY, "application/json; charset=utf-8"),
    "/bigjson": (200, b'{"pad": "' + BIG + b'"}', "application/json"),
    "/badjson": (200, b"{not json", "application/json"),
    "/nan": (200, b'{"x": NaN}', "application/json"),
    "/big": (200, BIG, "text/plain"),
    "/text": (200, b"hello", "text/plain"),
    "/fail": (500, b"boom", "text/plain"),
    "/slow": (200, b"late", "text/plain"),
    "/redirect": (302, b"", "text/plain"),
}


@dataclass
class Fixture:
    port: int
    seen: list[dict[str, str]] = field(default_factory=list)  # request headers, plus ":method"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {":method": self.command} | {k.lower(): v for k, v in self.headers.items()}
        self.server.fixture.seen.append(headers)  # type: ignore[attr-defined]
        if self.path == "/echo":
            reply = {"method": self.command, "body": body.decode(), "ct": headers["content-type"]}
            status, payload, content_type = 201, json.dumps(reply).encode(), "application/json"
        else:
            status, payload, content_type = ROUTES.get(self.path, (404, b"nope", "text/plain"))
        if self.path == "/slow":
            time.sleep(0.6)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if status == 302:
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _handle


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (the timeout tests) is gone before ``/slow`` answers:
        # socketserver would print that traceback from its thread, after the test,
        # into whichever test's output is being captured then.
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


@pytest.fixture
def server() -> Iterator[Fixture]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    fixture = Fixture(port=httpd.server_address[1])
    httpd.fixture = fixture  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield fixture
    finally:
        httpd.shutdown()
        httpd.server_close()


def _local(port: int, allow_private: bool = True) -> Destination:
    return Destination(scheme="http", host="127.0.0.1", ports=[port], allow_private=allow_private)


def _http(workspace: Path, server: Fixture, step: Any, **limits: Any) -> Delivered:
    return _run(http_handler.run, _ctx(workspace, [_local(server.port)], **limits), step)


def test_noop_echoes_its_input(tmp_path: Path) -> None:
    result = _run(noop.run, _ctx(tmp_path, []), {"a": [1, "two"]})
    assert result.ok is True
    assert result.output == {"echo": {"a": [1, "two"]}}
    assert result.error_code is None


def test_http_get_json(tmp_path: Path, server: Fixture) -> None:
    result = _http(tmp_path, server, {"url": server.url("/json"), "headers": {"X-Trace": "t1"}})
    assert result.ok is True, result.error_message
    out = result.output
    assert out["status"] == 200
    assert out["json"] == {"a": 1, "b": [True, None]}
    assert "text" not in out
    assert out["bytes"] == len(JSON_BODY)
    assert out["truncated"] is False
    assert out["body_sha256"] == hashlib.sha256(JSON_BODY).hexdigest()
    ctype = "application/json; charset=utf-8"
    assert out["headers"] == {"content-type": ctype, "content-length": str(len(JSON_BODY))}
    assert result.artifacts == (Artifact("response_body", ctype, JSON_BODY),)
    [seen] = server.seen
    assert seen[":method"] == "GET"
    assert seen["idempotency-key"] == OP_KEY
    assert seen["host"] == f"127.0.0.1:{server.port}"
    assert seen["x-trace"] == "t1"


def test_http_post_sends_json(tmp_path: Path, server: Fixture) -> None:
    step = {"method": "POST", "url": server.url("/echo"), "json": {"k": "v"}}
    result = _http(tmp_path, server, step)
    assert result.ok is True
    assert result.output["status"] == 201
    echoed = result.output["json"]
    assert isinstance(echoed, dict)
    assert echoed["method"] == "POST"
    assert echoed["ct"] == "application/json"
    assert json.loads(str(echoed["body"])) == {"k": "v"}
    assert server.seen[0]["idempotency-key"] == OP_KEY


@pytest.mark.parametrize(
    ("path", "cap", "kept", "truncated"),
    [("/big", 1000, 1000, True), ("/text", 5, 5, False), ("/bigjson", 100, 100, True)],
)
def test_http_reads_at_most_the_cap(
    tmp_path: Path, server: Fixture, path: str, cap: int, kept: int, truncated: bool
) -> None:
    result = _http(tmp_path, server, {"url": server.url(path)}, cap=cap)
    assert result.ok is True
    assert result.output["bytes"] == kept
    assert result.output["truncated"] is truncated
    body = result.artifacts[0].content
    assert len(body) == kept
    assert result.output["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert result.output["text"] == body.decode()  # truncated JSON is never parsed
    assert "json" not in result.output


@pytest.mark.parametrize("path", ["/badjson", "/nan"])
def test_http_invalid_json_falls_back_to_text(tmp_path: Path, server: Fixture, path: str) -> None:
    result = _http(tmp_path, server, {"url": server.url(path)})
    assert result.ok is True
    assert "json" not in result.output
    assert result.output["text"] == ROUTES[path][1].decode()


def test_http_500_is_a_failed_result_with_output(tmp_path: Path, server: Fixture) -> None:
    result = _http(tmp_path, server, {"url": server.url("/fail")})
    _assert_failed(result)
    assert result.output["status"] == 500
    assert result.output["text"] == "boom"


def test_http_redirects_are_not_followed(tmp_path: Path, server: Fixture) -> None:
    result = _http(tmp_path, server, {"url": server.url("/redirect")})
    assert result.output["status"] == 302
    assert len(server.seen) == 1


def test_http_save_as_writes_the_body(tmp_path: Path, server: Fixture) -> None:
    result = _http(tmp_path, server, {"url": server.url("/text"), "save_as": "out.txt"})
    assert result.ok is True
    assert result.output["saved_as"] == "out.txt"
    assert (tmp_path / "out.txt").read_bytes() == b"hello"


def test_http_save_as_does_not_follow_symlinks(tmp_path: Path, server: Fixture) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (workspace / "out.txt").symlink_to(outside)
    _assert_failed(_http(workspace, server, {"url": server.url("/text"), "save_as": "out.txt"}))
    assert outside.read_text() == "keep"


def test_http_timeout(tmp_path: Path, server: Fixture) -> None:
    started = time.monotonic()
    result = _http(tmp_path, server, {"url": server.url("/slow")}, timeout_s=0.2)
    assert time.monotonic() - started < 1.0
    _assert_failed(result, ErrorCode.HANDLER_TIMEOUT)


def test_http_connection_refused_is_upstream_unavailable(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = _ctx(tmp_path, [_local(port)])
    result = _run(http_handler.run, ctx, {"url": f"http://127.0.0.1:{port}/"})
    _assert_failed(result, ErrorCode.UPSTREAM_UNAVAILABLE)  # nothing sent: safe to retry
    assert "ConnectError" in (result.error_message or "")


def test_http_ignores_proxy_environment(
    tmp_path: Path, server: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    assert _http(tmp_path, server, {"url": server.url("/text")}).ok is True


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "2130706433"])
def test_http_checks_resolved_addresses(tmp_path: Path, server: Fixture, host: str) -> None:
    ctx = _ctx(tmp_path, [Destination(scheme="http", host=host, ports=[server.port])])
    with pytest.raises(GatehouseError) as info:
        _run(http_handler.run, ctx, {"url": f"http://{host}:{server.port}/json"})
    assert info.value.code is ErrorCode.DESTINATION_NOT_ALLOWED
    assert info.value.details["address"] in {"127.0.0.1", "::1"}
    assert server.seen == []


U = "http://127.0.0.1/"
BAD_HTTP: list[Any] = [{}, {"url": 5}, {"url": U, "method": "PATCH"}, {"url": U, "extra": 1}]
BAD_HTTP += [{"url": U, "headers": {"X": 1}}, {"url": U, "headers": {"bad name": "v"}}]
BAD_HTTP += [{"url": U, "headers": {"X": "a\r\nInjected: 1"}}, {"url": U, "json": float("nan")}]
BAD_HTTP += [{"url": U, "headers": {name: "x"}} for name in ("Host", "HOST", "Idempotency-Key")]
BAD_HTTP += [{"url": U, "headers": {"idempotency-key": "x"}}, {"url": U, "save_as": 7}]
BAD_HTTP += [{"url": U, "save_as": n} for n in (".hidden", "..", "../x", "a/b", "", "x" * 129)]


@pytest.mark.parametrize("step", BAD_HTTP)
def test_http_invalid_input_is_a_failed_result(tmp_path: Path, step: Any) -> None:
    # Reserved headers, bad save_as names, NaN... are refused before any policy check or
    # network call: with no destinations, input that got past validation would raise instead.
    _assert_failed(_run(http_handler.run, _ctx(tmp_path, []), step))


def test_http_missing_limits_is_refused(tmp_path: Path) -> None:
    connector = Connector(connector_id="web", driver_kind=DriverKind.HTTP, description="t")
    ctx = _Ctx(tmp_path, connector)
    with pytest.raises(GatehouseError) as info:
        _run(http_handler.run, ctx, {"url": "http://127.0.0.1/"})
    assert info.value.code is ErrorCode.LIMITS_MISSING
