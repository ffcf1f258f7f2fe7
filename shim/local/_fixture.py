"""A small inventory service on loopback, for the demo and the tests.

It stands in for "a real service on this machine" that an ``http`` step
calls. It de-duplicates on ``Idempotency-Key`` the way a well-behaved callee
does, and counts what it receives so tests can prove nothing ran twice.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["INVENTORY", "InventoryService"]

INVENTORY = {
    "warehouse": "demo",
    "items": [
        {"sku": "GH-001", "name": "gate hinge", "count": 12},
        {"sku": "GH-002", "name": "ledger book", "count": 3},
        {"sku": "GH-003", "name": "brass key", "count": 40},
    ],
}


class InventoryService:
    """``with InventoryService() as svc: svc.base_url`` → ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []  # every request: method, path, idempotency key
        self._lock = threading.Lock()
        service = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, body: bytes, media: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                with service._lock:
                    service.requests.append({"method": "GET", "path": self.path, "key": key})
                if self.path == "/inventory.json":
                    self._answer(200, json.dumps(INVENTORY).encode(), "application/json")
                elif self.path == "/status":
                    self._answer(200, b'{"status":"ok"}', "application/json")
                else:
                    self._answer(404, b'{"error":"not found"}', "application/json")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def count(self, path: str) -> int:
        """How many requests reached ``path``."""
        with self._lock:
            return sum(1 for r in self.requests if r["path"] == path)

    def effects(self, path: str) -> int:
        """How many distinct effects ``path`` applied: repeats of a key apply once."""
        with self._lock:
            return len({r["key"] for r in self.requests if r["path"] == path})

    def __enter__(self) -> InventoryService:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
