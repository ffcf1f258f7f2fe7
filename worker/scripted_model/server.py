"""A scripted OpenAI-compatible chat server (``POST /v1/chat/completions``).

Why it is product code: operators dry-run recipes offline against it (no model
provider, no network), and the tests and the demo point OpenCode and the
planner at it. It plays back a script (``worker.scripted_model.script``) and
answers in the OpenAI chat-completions shape, non-streaming or as server-sent
events, text or tool calls.

Stdlib only (``ThreadingHTTPServer``), bound to 127.0.0.1::

    with ScriptedModel(load_script(Path("script.json"))) as model:
        model.base_url   # http://127.0.0.1:PORT/v1
        model.requests   # every request seen, in order

or from a shell: ``gatehouse-model --script script.json --port 8091``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from contracts import JsonObject, JsonValue
from worker.scripted_model.script import Reply, Script, pick_reply

__all__ = ["CHAT_PATH", "RecordedRequest", "ScriptedModel"]

CHAT_PATH = "/v1/chat/completions"

# Small pieces so a streaming client really has to reassemble the content.
_STREAM_PIECE_CHARS = 16
_CREATED = 1_700_000_000  # fixed, so responses are reproducible
# A stalled reply holds its connection at most this long (the client normally
# gives up long before); it ends early when the server stops.
_STALL_MAX_S = 900.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (header names lowercased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: JsonValue  # the parsed JSON body; None when absent or not JSON
    raw_body: bytes


def _usage(request_body: JsonValue, content: str, reply: Reply | None = None) -> JsonObject:
    """The reply's scripted usage, or whitespace-separated words standing in for tokens."""
    if reply is not None and reply.usage is not None:
        scripted = reply.usage
        return {
            "prompt_tokens": scripted.prompt_tokens,
            "completion_tokens": scripted.completion_tokens,
            "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
        }
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


def _tool_calls(serial: int, reply: Reply) -> list[JsonValue]:
    return [
        {
            "id": f"call_{serial}_{index}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.arguments, separators=(",", ":")),
            },
        }
        for index, call in enumerate(reply.tool_calls)
    ]


class ScriptedModel:
    """Runs the scripted server on a background thread; see the module docstring."""

    def __init__(self, script: Script, port: int = 0) -> None:
        self.script = script
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what an OpenAI-compatible client expects."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the scripted model is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def play(self, script: Script) -> None:
        """Play ``script`` from its first reply on (a test that shares one server with
        others starts its own sequence, whatever ran before it)."""
        with self._lock:
            self.script = script
            self._served = 0

    def chat_requests(self) -> list[JsonObject]:
        """The parsed bodies of the chat requests so far."""
        return [
            r.body
            for r in self.requests
            if r.path == CHAT_PATH and r.method == "POST" and isinstance(r.body, dict)
        ]

    def start(self) -> ScriptedModel:
        server = ThreadingHTTPServer(("127.0.0.1", self._port), _make_handler(self))
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

    def stop(self) -> None:
        # Wake handlers sleeping in a delay or a stall first, so shutdown does not wait.
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record(self, request: RecordedRequest, *, answered: bool) -> int:
        """Log the request; when ``answered``, number it among the chat requests."""
        with self._lock:
            self._requests.append(request)
            serial = self._served
            if answered:
                self._served += 1
            return serial


def _make_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, and a stream ends when the socket closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the requests are kept in ``model.requests``."""

        def do_GET(self) -> None:
            self._capture()
            if self.path.rstrip("/") == "/v1/models":  # some clients list models first
                models = {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                self._send(200, "application/json", json.dumps(models).encode("utf-8"))
                return
            self._not_found()

        def do_POST(self) -> None:
            request = self._capture()
            if request.path != CHAT_PATH:
                self._not_found()
                return
            serial = model._record(request, answered=True)
            reply = pick_reply(model.script, serial, request.body)
            if reply.delay_s > 0 and model._stopping.wait(reply.delay_s):
                return  # the server is closing; the client has long given up
            try:
                if reply.status is not None:
                    data = reply.body.encode("utf-8")
                    self._send(reply.status, "application/json", data, reply.headers)
                elif isinstance(request.body, dict) and request.body.get("stream") is True:
                    self._stream(serial, request.body, reply)
                else:
                    self._complete(serial, request.body, reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (an abort, a timeout): nothing more to say

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

        def _complete(self, serial: int, body: JsonValue, reply: Reply) -> None:
            if reply.stall:  # nothing at all, until the client gives up
                model._stopping.wait(_STALL_MAX_S)
                return
            message: JsonObject = {"role": "assistant", "content": reply.text or None}
            if reply.tool_calls:
                message["tool_calls"] = _tool_calls(serial, reply)
            payload: JsonObject = {
                "id": f"chatcmpl-scripted-{serial}",
                "object": "chat.completion",
                "created": _CREATED,
                "model": self._model_name(body),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                    }
                ],
                "usage": _usage(body, reply.text, reply),
            }
            self._send(200, "application/json", json.dumps(payload).encode("utf-8"))

        def _stream(self, serial: int, body: JsonValue, reply: Reply) -> None:
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
            text = reply.text
            pieces = [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), 16)]
            if reply.stall:  # the first piece, then silence: a model that stops mid-turn
                self.wfile.write(chunk({"content": pieces[0] if pieces else "…"}, None))
                self.wfile.flush()
                model._stopping.wait(_STALL_MAX_S)
                return
            for piece in pieces:
                self.wfile.write(chunk({"content": piece}, None))
                self.wfile.flush()
            if reply.tool_calls:
                calls = _tool_calls(serial, reply)
                for index, call in enumerate(calls):
                    assert isinstance(call, dict)
                    self.wfile.write(chunk({"tool_calls": [{"index": index, **call}]}, None))
                self.wfile.flush()
            finish = "tool_calls" if reply.tool_calls else "stop"
            self.wfile.write(chunk({}, finish))
            options = body.get("stream_options") if isinstance(body, dict) else None
            if isinstance(options, dict) and options.get("include_usage") is True:
                usage: JsonObject = dict(base)  # as OpenAI does: a last chunk, no choices
                usage["choices"] = []
                usage["usage"] = _usage(body, text, reply)
                self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
