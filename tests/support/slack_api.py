"""A loopback stand-in for Slack's Web API, as slack_sdk's ``WebClient`` calls it.

``SlackWebApi`` answers ``POST /api/chat.postMessage`` and ``POST /api/chat.update``
the way Slack does (``ok``, ``channel``, ``ts``; ``ok: false`` with an ``error``
otherwise), checks the bot token, and records every call. ``fail_next`` makes
the next call of a method whose body holds a marker fail (HTTP 500, Slack's
``fatal_error``). Any other POST (a click's ``response_url``) is recorded and
answered 200, so the same server stands in for Slack's message replies."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Call", "SlackWebApi"]


@dataclass
class Call:
    path: str
    method: str  # chat.postMessage, chat.update; "" for any other path
    token: str
    body: dict[str, Any]
    answered: int  # the HTTP status it was answered with
    at: float = field(default_factory=time.time)


class SlackWebApi:
    def __init__(self, token: str, channel_ids: dict[str, str] | None = None) -> None:
        self.token = token
        self.channel_ids = channel_ids or {}  # a channel name posted to -> its id
        self.calls: list[Call] = []
        self.posted: dict[tuple[str, str], dict[str, Any]] = {}  # (channel, ts) -> message
        self._fail_next: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(size)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                auth = self.headers.get("Authorization", "")
                status, answer = api._answer(self.path, auth.removeprefix("Bearer "), body)
                out = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *_: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.api_url = f"{self.url}/api/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SlackWebApi:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, path: str, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        method = path.removeprefix("/api/") if path.startswith("/api/") else ""
        with self._lock:
            status, answer = self._answer_locked(method, token, body)
            self.calls.append(Call(path, method, token, body, status))
        return status, answer

    def _answer_locked(
        self, method: str, token: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if not method:
            return 200, {"ok": True}  # a response_url
        if token != self.token:
            return 200, {"ok": False, "error": "invalid_auth"}
        text = json.dumps(body)
        armed = [a for a in self._fail_next if a[0] == method and a[1] in text]
        if armed:
            self._fail_next.remove(armed[0])
            return 500, {"ok": False, "error": "fatal_error"}
        if method == "chat.postMessage":
            channel = self.channel_ids.get(str(body.get("channel")), str(body.get("channel")))
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            self.posted[(channel, ts)] = body
            return 200, {"ok": True, "channel": channel, "ts": ts, "message": body}
        if method == "chat.update":
            key = (str(body.get("channel")), str(body.get("ts")))
            if key not in self.posted:
                return 200, {"ok": False, "error": "message_not_found"}
            self.posted[key] = body
            return 200, {"ok": True, "channel": key[0], "ts": key[1], "text": body.get("text")}
        return 200, {"ok": False, "error": "unknown_method"}

    def fail_next(self, method: str, about: str) -> None:
        """Fail the next call of ``method`` whose body holds ``about`` (HTTP 500)."""
        with self._lock:
            self._fail_next.append((method, about))

    def on(self, method: str, about: str | None = None, path: str | None = None) -> list[Call]:
        with self._lock:
            return [
                c
                for c in self.calls
                if (c.method == method if path is None else c.path == path)
                and (about is None or about in json.dumps(c.body))
            ]

    def wait_for(
        self,
        method: str,
        count: int,
        about: str | None = None,
        timeout: float = 30,
        path: str | None = None,
    ) -> list[Call]:
        """The calls of ``method`` (or on ``path``) whose body holds ``about``, once
        ``count`` came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.on(method, about, path)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{method or path}: {len(self.on(method, about, path))} calls,"
                             f" wanted {count}")  # fmt: skip
