"""A scripted OpenAI-compatible model server for tests.

Why a real server and not a mocked transport: the planner's contract is the
wire (URL, headers, body bytes, status codes, timeouts, a closed socket), so
tests should cross a real socket. Why a script and not a fake model: tests
must decide exactly what the "model" proposes, including broken answers.

Stdlib only (``ThreadingHTTPServer`` on a background thread), bound to
127.0.0.1 on an ephemeral port::

    with ScriptedModel([{"content": plan}, {"status": 500, "body": "boom"}]) as model:
        settings = ModelSettings(base_url=model.base_url, model="m", api_key=None)
        ...
        model.requests  # every request seen, in order

Turns are served in order; the last one repeats. A turn is one of

* ``{"content": str | JSON}`` a chat completion whose message content is the
  string (a JSON value is dumped); with ``"stream": true`` in the request it is
  sent as server-sent events, ``choices[0].delta.content`` piece by piece;
* ``{"status": int, "body": str, "headers": {...}}`` that status, raw body
  and extra response headers, verbatim (so a 200 with a malformed completion,
  or a redirect with a Location, is scriptable too);

and any turn may add ``"delay_s": float`` to wait before answering.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TypedDict

from contracts._json import JsonObject, JsonValue

__all__ = ["CHAT_PATH", "RecordedRequest", "ScriptedModel", "Turn"]

CHAT_PATH = "/v1/chat/completions"

# Small pieces so a streaming client really has to reassemble the content.
_STREAM_PIECE_CHARS = 16
_CREATED = 1_700_000_000  # fixed, so responses are reproducible


class Turn(TypedDict, total=False):
    """One scripted answer. Give ``content`` or ``status`` (+ ``body``)."""

    content: JsonValue
    status: int
    body: str
    headers: dict[str, str]
    delay_s: float


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (header names lowercased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: JsonValue  # the parsed JSON body; None when absent or not JSON
    raw_body: bytes


@dataclass(frozen=True)
class _Answer:
    content: str | None
    status: int
    body: str
    headers: dict[str, str]
    delay_s: float


def _compile(turn: Turn) -> _Answer:
    """Check a turn up front, so a typo fails the test at setup, not mid-request."""
    unknown = set(turn) - {"content", "status", "body", "headers", "delay_s"}
    if unknown:
        raise ValueError(f"unknown turn keys: {sorted(unknown)}")
    delay_s = float(turn.get("delay_s", 0.0))
    if "content" in turn:
        if "status" in turn or "body" in turn or "headers" in turn:
            raise ValueError("a turn gives either content or status/body/headers, not both")
        content = turn["content"]
        text = content if isinstance(content, str) else json.dumps(content)
        return _Answer(content=text, status=200, body="", headers={}, delay_s=delay_s)
    if "status" in turn:
        return _Answer(
            content=None,
            status=turn["status"],
            body=turn.get("body", ""),
            headers=dict(turn.get("headers", {})),
            delay_s=delay_s,
        )
    raise ValueError("a turn needs content or status")


def _usage(request_body: JsonValue, content: str) -> JsonObject:
    """Whitespace-separated words stand in for tokens; only the shape matters."""
    prompt_tokens = 0
    messages = request_body.get("messages") if isinstance(request_body, dict) else None
    for message in messages if isinstance(messages, list) else []:
        text = message.get("content") if isinstance(message, dict) else None
        if isinstance(text, str):
            prompt_tokens += len(text.split())
    completion_tokens = len(content.split())
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class ScriptedModel:
    """Context manager running the scripted server; see the module docstring."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        if not turns:
            raise ValueError("a script needs at least one turn")
        self._answers = [_compile(t) for t in turns]
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- public -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what ModelSettings.base_url expects."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedModel is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def __enter__(self) -> ScriptedModel:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Wake handlers sleeping in a delay first, so shutdown does not wait on them.
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- used by the handler --------------------------------------------------

    def _record(self, request: RecordedRequest, *, answered: bool) -> tuple[int, _Answer]:
        """Log the request; when ``answered``, also take the next turn (the last repeats)."""
        with self._lock:
            self._requests.append(request)
            serial = self._served
            if answered:
                self._served += 1
            return serial, self._answers[min(serial, len(self._answers) - 1)]


def _make_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, and a stream ends when the socket closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output clean."""

        def do_GET(self) -> None:
            self._capture()
            self._not_found()

        def do_POST(self) -> None:
            request = self._capture()
            if request.path != CHAT_PATH:
                self._not_found()
                return
            serial, answer = model._record(request, answered=True)
            if answer.delay_s > 0 and model._stopping.wait(answer.delay_s):
                return  # the server is closing; the client has long given up
            try:
                if answer.content is None:
                    self._send(
                        answer.status,
                        "application/json",
                        answer.body.encode("utf-8"),
                        answer.headers,
                    )
                elif isinstance(request.body, dict) and request.body.get("stream") is True:
                    self._stream(serial, request.body, answer.content)
                else:
                    self._complete(serial, request.body, answer.content)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up: that is what the test wanted

        def _capture(self) -> RecordedRequest:
            """Read the body and build the record; off-route requests are logged here."""
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            body: JsonValue
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(self.command, self.path, headers, body, raw)
            if self.command != "POST" or self.path != CHAT_PATH:
                model._record(request, answered=False)
            return request

        # -- responses --------------------------------------------------------

        def _not_found(self) -> None:
            payload = {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            self._send(404, "application/json", json.dumps(payload).encode("utf-8"))

        def _send(
            self,
            status: int,
            media_type: str,
            data: bytes,
            extra_headers: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", media_type)
            for name, value in (extra_headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _model_name(self, body: JsonValue) -> str:
            name = body.get("model") if isinstance(body, dict) else None
            return name if isinstance(name, str) else "scripted"

        def _complete(self, serial: int, body: JsonValue, content: str) -> None:
            payload: JsonObject = {
                "id": f"chatcmpl-scripted-{serial}",
                "object": "chat.completion",
                "created": _CREATED,
                "model": self._model_name(body),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(body, content),
            }
            self._send(200, "application/json", json.dumps(payload).encode("utf-8"))

        def _stream(self, serial: int, body: JsonValue, content: str) -> None:
            base: JsonObject = {
                "id": f"chatcmpl-scripted-{serial}",
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": self._model_name(body),
            }

            def chunk(delta: JsonObject, finish_reason: str | None) -> bytes:
                event: JsonObject = dict(base)
                event["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
                return f"data: {json.dumps(event)}\n\n".encode()

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(chunk({"role": "assistant", "content": ""}, None))
            for start in range(0, len(content), _STREAM_PIECE_CHARS):
                piece = content[start : start + _STREAM_PIECE_CHARS]
                self.wfile.write(chunk({"content": piece}, None))
                self.wfile.flush()
            self.wfile.write(chunk({}, "stop"))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
