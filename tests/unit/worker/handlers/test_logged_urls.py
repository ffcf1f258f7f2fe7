"""No log line shows a URL's query string, userinfo or fragment.

A real http step is sent to a loopback server with a secret in its query and
its fragment, in a process that logs as the worker does; every record any
logger made (httpx logs each request at INFO) is searched for the secret. The
same holds for the other ways a URL reaches a log: uvicorn's access line (a
request target), a URL object as an argument, a URL inside a message.
"""

from __future__ import annotations

import ast
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from contracts import Destination, hide_url_secrets_in_logs, url_for_log
from tests.unit.worker.handlers.handler_cases import ctx, run
from worker.handlers import http as http_handler

SECRET = "s3cr3t-token-value"
ROOT = Path(__file__).resolve().parents[4]


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hidden() -> Iterator[None]:
    """URLs hidden as the worker and the shim hide them, this test only."""
    made = logging.getLogRecordFactory()
    hide_url_secrets_in_logs()
    try:
        yield
    finally:
        logging.setLogRecordFactory(made)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name} {r.getMessage()} {r.args!r}" for r in caplog.records]


def test_a_real_http_step_logs_no_query(
    hidden: None, port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    where = Destination(scheme="http", host="127.0.0.1", ports=[port], allow_private=True)
    url = f"http://127.0.0.1:{port}/items/42?token={SECRET}&page=2#frag-{SECRET}"
    with caplog.at_level(logging.DEBUG):
        result = run(http_handler.run, ctx(tmp_path, [where]), {"url": url})
    assert result.ok, result.error_message
    lines = _lines(caplog)
    assert any("/items/42?..." in line for line in lines if line.startswith("httpx")), lines
    assert not [line for line in lines if SECRET in line]


@pytest.mark.parametrize(
    "url",
    [
        f"https://api.example.com/v1/x?token={SECRET}",
        f"https://user:{SECRET}@api.example.com/v1/x",
        f"https://{SECRET}@api.example.com:8443/",
        f"https://api.example.com/v1/x#{SECRET}",
        f"https://api.example.com/v1/x?a=1&b={SECRET}#f",
        f"http://[::1]:8080/p?key={SECRET}",
        f"https://api.example.com?{SECRET}",
        f"https://api.example.com/p?q=%20{SECRET}",
        f"wss://hooks.example.com/ws?sig={SECRET}",
    ],
)
def test_url_for_log_keeps_where_and_drops_the_rest(url: str) -> None:
    shown = url_for_log(url)
    assert SECRET not in shown
    assert "example.com" in shown or "[::1]:8080" in shown
    assert ("?" in url.split("#", maxsplit=1)[0]) == shown.endswith("?...")


@pytest.mark.parametrize(
    ("logger", "message", "args"),
    [
        # uvicorn's access line: the target is one argument
        (
            "uvicorn.access",
            '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5", "GET", f"/cb?code={SECRET}", "1.1", 200),
        ),
        # httpx's request line: the URL is an httpx.URL
        ("httpx", "HTTP Request: %s %s", ("GET", httpx.URL(f"https://h.example/p?t={SECRET}"))),
        # a URL in a message of Gatehouse's own
        ("gatehouse.worker", f"calling https://h.example/p?t={SECRET} now", ()),
        ("gatehouse.worker", "failed: %s", (f"error at https://u:{SECRET}@h.example/ (503)",)),
    ],
    ids=["uvicorn-access-target", "httpx-url-object", "in-the-message", "inside-an-argument"],
)
def test_every_way_a_url_reaches_a_log_is_hidden(
    hidden: None,
    caplog: pytest.LogCaptureFixture,
    logger: str,
    message: str,
    args: tuple[object, ...],
) -> None:
    named = logging.getLogger(logger)
    # uvicorn, once configured by a test that serves, stops its access logger from
    # propagating: caplog would see nothing
    kept = named.propagate, named.disabled
    named.propagate, named.disabled = True, False
    try:
        with caplog.at_level(logging.INFO, logger=logger):
            named.info(message, *args)
    finally:
        named.propagate, named.disabled = kept
    lines = _lines(caplog)  # (once per handler an earlier test left on the way)
    assert lines, "nothing was logged"
    assert all(SECRET not in line for line in lines), lines


@pytest.mark.parametrize(
    ("path", "function"),
    [("worker/app.py", "main"), ("shim/api/asgi.py", None)],
)
def test_each_process_hides_them(path: str, function: str | None) -> None:
    """The worker's main and the shim's ASGI module install it before anything logs."""
    tree = ast.parse((ROOT / path).read_text())
    body = tree.body
    if function is not None:
        [found] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        body = found.body
    calls = [
        n.value.func.id
        for n in body
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
    ]
    assert "hide_url_secrets_in_logs" in calls, calls
