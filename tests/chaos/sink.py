"""The sink: a callee on loopback that records every request and effect it receives.

Two kinds of endpoint, as real callees come:

* ``POST /keyed/effect`` de-duplicates on ``Idempotency-Key`` like a well-behaved
  service: a repeated key gets the first answer again and applies nothing.
* ``POST /unkeyed/effect`` applies every request it receives: sending it twice
  does it twice.

Each body carries an ``effect_id`` the harness chose. The sink is the ground
truth the checker compares against; it knows nothing about Gatehouse.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["KEYED_PATH", "UNKEYED_PATH", "Applied", "Received", "Sink"]

KEYED_PATH = "/keyed/effect"
UNKEYED_PATH = "/unkeyed/effect"


@dataclass(frozen=True)
class Received:
    """One request, as it arrived."""

    path: str
    key: str | None  # the Idempotency-Key header, if any
    effect_id: str | None  # from the JSON body, if it had one
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Applied:
    """One effect the sink applied (a de-duplicated repeat is not one)."""

    path: str
    effect_id: str
    key: str | None


class Sink:
    """``with Sink() as sink: sink.base_url`` → ``http://127.0.0.1:PORT``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.received: list[Received] = []
        self.applied: list[Applied] = []
        self._answers: dict[str, bytes] = {}  # keyed endpoint: first answer per key
        self.answers_lost = 0  # answers the caller was no longer there to read
        self.cut_off: list[tuple[str, str]] = []  # (path, effect_id) of those calls
        self._lock = threading.Lock()
        self._delay_s = delay_s  # held before answering: widens the window a kill can land in
        sink = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                effect = body.get("effect_id") if isinstance(body, dict) else None
                key = self.headers.get("Idempotency-Key")
                status, answer = sink._receive(
                    Received(
                        path=self.path,
                        key=key,
                        effect_id=effect if isinstance(effect, str) else None,
                        at=time.monotonic(),
                    )
                )
                if sink._delay_s > 0:
                    time.sleep(sink._delay_s)
                try:
                    self._answer(status, answer)
                except OSError:
                    # The caller died (kill -9) before reading the answer: this call was
                    # cut off mid-flight, after its effect.
                    with sink._lock:
                        sink.answers_lost += 1
                        if isinstance(effect, str):
                            sink.cut_off.append((self.path, effect))

        class _Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                # A caller that died mid-request: nothing to answer, nothing to print.
                return

        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _receive(self, req: Received) -> tuple[int, bytes]:
        with self._lock:
            self.received.append(req)
            if req.effect_id is None or req.path not in (KEYED_PATH, UNKEYED_PATH):
                return 400, b'{"error":"send a JSON body with an effect_id to an effect path"}'
            if req.path == KEYED_PATH:
                if req.key is None:
                    return 400, b'{"error":"this endpoint needs an Idempotency-Key"}'
                if req.key in self._answers:
                    return 200, self._answers[req.key]
            self.applied.append(Applied(path=req.path, effect_id=req.effect_id, key=req.key))
            n = sum(1 for a in self.applied if a.effect_id == req.effect_id)
            answer = json.dumps({"effect_id": req.effect_id, "applied": True, "nth": n}).encode()
            if req.path == KEYED_PATH and req.key is not None:
                self._answers[req.key] = answer
            return 200, answer

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def applications(self, effect_id: str) -> int:
        """How many times the effect was applied (the truth an operator decides by)."""
        with self._lock:
            return sum(1 for a in self.applied if a.effect_id == effect_id)

    def forget(self, effect_id: str) -> Applied:
        """Remove one application of an effect from the truth (a negative control's
        planted loss); ``remember`` puts it back."""
        with self._lock:
            for n, a in enumerate(self.applied):
                if a.effect_id == effect_id:
                    return self.applied.pop(n)
        raise KeyError(effect_id)

    def remember(self, applied: Applied) -> None:
        with self._lock:
            self.applied.append(applied)

    def snapshot(self) -> tuple[list[Received], list[Applied]]:
        with self._lock:
            return list(self.received), list(self.applied)

    def __enter__(self) -> Sink:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
