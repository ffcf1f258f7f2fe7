"""Loopback receivers for notifications: an HTTP endpoint and an SMTP server.

``WebhookReceiver`` records every request (path, headers, body) and answers
500 to the first ``fail_first`` requests on ``fail_path`` (deliveries to
several sinks go out in no fixed order, so the failure names its path);
``hold`` makes it take a request, record it and then hang without answering
until released (a worker can be killed while it waits). ``MailReceiver`` is
an aiosmtpd server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

__all__ = ["MailReceiver", "Received", "WebhookReceiver"]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


class WebhookReceiver:
    def __init__(self, fail_first: int = 0, fail_path: str = "") -> None:
        self.fail_first = fail_first
        self.fail_path = fail_path
        self.requests: list[Received] = []
        self._fail_next: list[tuple[str, str]] = []  # (path, marker): answer 500 once
        self.hold = threading.Event()  # set: take requests, record them, answer nothing
        self.release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(size))  # fmt: skip
                with receiver._lock:
                    receiver.requests.append(got)
                    failing = len(receiver.on_locked(self.path)) <= receiver.fail_first
                    failing = failing and self.path == receiver.fail_path
                    armed = [
                        a for a in receiver._fail_next
                        if a[0] == self.path and a[1].encode() in got.body
                    ]  # fmt: skip
                    if armed:
                        receiver._fail_next.remove(armed[0])
                        failing = True
                if receiver.hold.is_set():
                    receiver.release.wait(60)
                    return
                self.send_response(500 if failing else 204)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, path: str, about: str) -> None:
        """Answer 500 to the next request on ``path`` whose body holds ``about``."""
        with self._lock:
            self._fail_next.append((path, about))

    def on(self, path: str, about: str | None = None) -> list[Received]:
        with self._lock:
            return self.on_locked(path, about)

    def on_locked(self, path: str, about: str | None = None) -> list[Received]:
        return [
            r
            for r in self.requests
            if r.path == path and (about is None or about.encode() in r.body)
        ]

    def wait_for(
        self, path: str, count: int, timeout: float = 30, about: str | None = None
    ) -> list[Received]:
        """The requests on ``path`` (whose body holds ``about``), once ``count`` came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.on(path, about)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{path}: {len(self.on(path, about))} requests, wanted {count}")


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.original_content or envelope.content))
        return "250 OK"


class MailReceiver:
    def __init__(self) -> None:
        self.box = _Mailbox()
        with socket.socket() as probe:  # aiosmtpd cannot start on port 0: pick one
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.controller = Controller(self.box, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> MailReceiver:
        self.controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.controller.stop()

    def wait_for(self, count: int, timeout: float = 30, about: str | None = None) -> list[Message]:
        """The mails (whose subject names ``about``), once ``count`` came."""

        def found() -> list[Message]:
            return [
                m
                for m in list(self.box.messages)
                if about is None or about in str(m.get("Subject", ""))
            ]

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(found()) >= count:
                return found()
            time.sleep(0.05)
        raise AssertionError(f"{len(found())} mails, wanted {count}")
