"""A number no JSON can carry, in what a tool or a provider answers, is recorded as documented.

Every place such an answer enters is fed Infinity, -Infinity and NaN (and a
float too large to be one, ``1e999``):

* an MCP result (values from the SDK, not text) and OpenCode's API answers and
  events (text parsed leniently: they are kept, not refused) record each as the
  placeholder ``{"gatehouse:placeholder": "non-finite number", "stored": ...}``,
  never ``null`` and never a string a tool could have sent;
* an http step's body holding one is not parsed: its text is kept;
* a model's answer holding one fails the call.

Whatever is recorded must be strict JSON that reads back as it was written.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import mcp.types
import pytest

from contracts import (
    PLACEHOLDER_KEY,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Limits,
    canonical_json,
    kept_loads,
    placeholder,
    strict_loads,
)
from worker.handlers import http as http_handler
from worker.handlers import mcp_proxy
from worker.handlers.opencode.client import OpencodeClient
from worker.handlers.opencode.events import EventFeed
from worker.planners import json_object_of

# (the number, its JSON spelling in text a tool may send, what the placeholder stores)
NON_FINITE = [
    (math.inf, "Infinity", "Infinity"),
    (-math.inf, "-Infinity", "-Infinity"),
    (math.nan, "NaN", "NaN"),
    (math.inf, "1e999", "Infinity"),
    (-math.inf, "-1e999", "-Infinity"),
]
IDS = [spelled for _, spelled, _ in NON_FINITE]


def _expected(stored: str) -> JsonObject:
    return {PLACEHOLDER_KEY: "non-finite number", "stored": stored}


def _reads_back(value: JsonValue) -> None:
    """Strict JSON, and the same value once read again."""
    assert strict_loads(canonical_json(value)) == value


@pytest.mark.parametrize(("number", "spelled", "stored"), NON_FINITE, ids=IDS)
def test_an_mcp_result_keeps_the_placeholder(number: float, spelled: str, stored: str) -> None:
    got = mcp.types.CallToolResult(
        content=[mcp.types.TextContent(type="text", text="answer")],
        structuredContent={"value": number, "nested": [{"deep": number}], "fine": 1.5},
    )
    output: JsonObject = {"tool": "calc/add"}
    # the one function that turns the SDK's result into the record
    result = mcp_proxy._result(got, output, Limits(timeout_s=5, max_output_bytes=65536))
    assert result.ok
    structured = result.output["structured_content"]
    assert structured == {
        "value": _expected(stored),
        "nested": [{"deep": _expected(stored)}],
        "fine": 1.5,
    }
    _reads_back(result.output)


@pytest.mark.parametrize(("number", "spelled", "stored"), NON_FINITE, ids=IDS)
def test_kept_loads_spells_it_as_the_placeholder(number: float, spelled: str, stored: str) -> None:
    parsed = kept_loads(f'{{"a": [{spelled}], "b": 2.5}}')
    assert parsed == {"a": [_expected(stored)], "b": 2.5}
    assert placeholder(number) == _expected(stored)
    _reads_back(parsed)


@pytest.mark.parametrize(("number", "spelled", "stored"), NON_FINITE, ids=IDS)
def test_an_http_body_holding_one_is_kept_as_text(number: float, spelled: str, stored: str) -> None:
    # what decides between "json" and "text" in the record
    assert http_handler._parse_json(f'{{"a": {spelled}}}'.encode()) is None


@pytest.mark.parametrize(("number", "spelled", "stored"), NON_FINITE, ids=IDS)
def test_a_model_answer_holding_one_fails(number: float, spelled: str, stored: str) -> None:
    completion = {"choices": [{"message": {"content": f'{{"steps": [{spelled}]}}'}}]}

    def fail(message: str, details: JsonObject) -> GatehouseError:
        return GatehouseError(ErrorCode.INVALID_REQUEST, message, details)

    with pytest.raises(GatehouseError, match="not JSON"):
        json_object_of(completion, 200, b"", "planner", fail)


class _OpencodeLike(BaseHTTPRequestHandler):
    """Answers as an OpenCode server might: a session list and an event stream, each
    with a non-finite number in them (the spelling is the server's ``spelled``)."""

    spelled = "Infinity"

    def do_GET(self) -> None:
        if self.path.startswith("/session"):
            body = f'[{{"id": "s1", "cost": {self.spelled}}}]'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'data: {"type": "server.connected"}\n\n')
        self.wfile.write(f'data: {{"type": "step", "cost": {self.spelled}}}\n\n'.encode())
        self.wfile.flush()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def opencode_like() -> Iterator[tuple[str, type[_OpencodeLike]]]:
    handler = type("Handler", (_OpencodeLike,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("number", "spelled", "stored"), NON_FINITE, ids=IDS)
def test_opencode_answers_and_events_keep_the_placeholder(
    opencode_like: tuple[str, type[_OpencodeLike]],
    tmp_path: Path,
    number: float,
    spelled: str,
    stored: str,
) -> None:
    url, handler = opencode_like
    handler.spelled = spelled
    client = OpencodeClient(url, "password", tmp_path)
    try:
        sessions = client.sessions()
    finally:
        client.close()
    assert sessions == [{"id": "s1", "cost": _expected(stored)}]
    _reads_back(list[JsonValue](sessions))
    feed = EventFeed(url, "password", tmp_path).start()
    try:
        event = feed.get(30)
        while event is not None and event.get("type") != "step":
            event = feed.get(30)
    finally:
        feed.close()
    assert event == {"type": "step", "cost": _expected(stored)}
    _reads_back(dict(event))
