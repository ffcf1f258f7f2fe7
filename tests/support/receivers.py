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

    def on(self, path: str) -> list[Received]:
        with self._lock:
            return self.on_locked(path)

    def on_locked(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.on(path)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{path}: {len(self.on(path))} requests, wanted {count}")


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

    def wait_for(self, count: int, timeout: float = 30) -> list[Message]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.box.messages) >= count:
                return list(self.box.messages)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.box.messages)} mails, wanted {count}")
