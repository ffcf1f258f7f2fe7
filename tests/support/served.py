"""The shim's app served by uvicorn on a loopback port, in a thread of the test.

For what a TestClient cannot do: a CLI talking HTTP, a stream read while it is
still open, a browser."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import uvicorn

from ledger import Tls
from shim.api import create_app
from shim.api.serving import head_timeout_protocol
from shim.settings import H11_MAX_HEAD_BYTES, ShimSettings
from tests.support.stack import GENEROUS_LIMITS

__all__ = ["ServedShim"]


class ServedShim:
    """``with ServedShim(database_url, tokens_file) as url:`` a live shim at ``url``;
    with ``tls``, HTTPS (``url`` is ``https://…``), as ``gatehouse up --tls-cert`` serves."""

    def __init__(
        self,
        database_url: str,
        tokens_file: Path,
        env: Mapping[str, str] | None = None,
        tls: Tls | None = None,
    ) -> None:
        settings = ShimSettings.from_env(
            {
                "GATEHOUSE_DATABASE_URL": database_url,
                "GATEHOUSE_TOKENS_FILE": str(tokens_file),
                **GENEROUS_LIMITS,
                **(env or {}),
            }
        )
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            create_app(settings),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
            # served as shim.local serves it: the head deadline, no forwarded headers
            http=head_timeout_protocol(settings.header_timeout_s),
            proxy_headers=False,
            h11_max_incomplete_event_size=H11_MAX_HEAD_BYTES,
            ssl_certfile=str(tls.cert) if tls else None,
            ssl_keyfile=str(tls.key) if tls else None,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the shim did not start"
            time.sleep(0.05)
        return self.url

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()
