"""The outside end of the OpenCode sandbox's bridge (see ``bridge.py``).

Two kinds of connection cross, and nothing else:

* the worker's own HTTP calls: a listener on ``127.0.0.1:<port>`` on the host
  (the server's URL as the client sees it) carries each connection to the
  sandbox's ``api.sock``;
* the server's calls to its model: ``provider.sock``, listened on here, carries
  each connection to the one provider ``host:port`` the worker is configured
  with. Where a connection goes is fixed here, outside the sandbox: nothing
  the sandbox sends can choose another destination.

Each connection is two threads copying bytes; closing the relay stops the
listeners (connections already open end with their peers).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from worker.sandbox.bridge import join

__all__ = ["Relay"]

_log = logging.getLogger("gatehouse.sandbox")
_CONNECT_TIMEOUT_S = 10.0


class Relay:
    """``Relay(folder, (host, port)).start()``; ``port`` is where the API is reached."""

    def __init__(self, folder: Path, provider: tuple[str, int]) -> None:
        self.folder = folder
        self.provider = provider
        self.port = 0
        self.connections = {"api": 0, "provider": 0}
        self._listeners: list[socket.socket] = []

    def start(self) -> Relay:
        api = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        api.bind(("127.0.0.1", 0))
        api.listen(64)
        self.port = int(api.getsockname()[1])
        path = self.folder / "provider.sock"
        path.unlink(missing_ok=True)
        provider = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        provider.bind(str(path))
        provider.listen(64)
        self._listeners = [api, provider]
        for name, listener, connect in (
            ("api", api, self._to_api),
            ("provider", provider, self._to_provider),
        ):
            threading.Thread(
                target=self._serve, args=(name, listener, connect), daemon=True,
                name=f"sandbox-relay-{name}",
            ).start()  # fmt: skip
        return self

    def _to_api(self) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(_CONNECT_TIMEOUT_S)
            conn.connect(str(self.folder / "api.sock"))
        except OSError:
            conn.close()
            raise
        return conn

    def _to_provider(self) -> socket.socket:
        return socket.create_connection(self.provider, timeout=_CONNECT_TIMEOUT_S)

    def _serve(
        self, name: str, listener: socket.socket, connect: Callable[[], socket.socket]
    ) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = connect()
            except OSError as exc:
                _log.warning("sandbox relay: %s connection not made: %s", name, exc)
                client.close()
                continue
            upstream.settimeout(None)
            self.connections[name] += 1
            threading.Thread(target=join, args=(client, upstream), daemon=True).start()

    def close(self) -> None:
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
            listener.close()
        self._listeners = []
