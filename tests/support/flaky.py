"""A loopback service that answers 503 to its first ``failures`` requests, then 200."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FlakyService"]


class FlakyService:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.keys: list[str] = []  # the Idempotency-Key of every request, in order
        self._lock = threading.Lock()
        service = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                with service._lock:
                    service.keys.append(self.headers.get("Idempotency-Key", ""))
                    failing = len(service.keys) <= service.failures
                body = b'{"busy":true}' if failing else b'{"ok":true}'
                self.send_response(503 if failing else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/flaky"

    def __enter__(self) -> FlakyService:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
