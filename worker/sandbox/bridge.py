"""The network bridge inside the OpenCode sandbox (stdlib only: run as a script).

The sandbox has its own network namespace with nothing in it but loopback, so
nothing reaches the host's network. Two unix sockets in a directory bound
into the sandbox are the only ways across, and this script is the inside end
of both:

* it listens on ``127.0.0.1:<provider port>`` in the sandbox and carries each
  connection to ``provider.sock``, whose outside end (``relay.py``) connects to
  the configured model provider and nowhere else;
* it listens on ``api.sock`` and carries each connection to the server's
  ``127.0.0.1:<serve port>`` in the sandbox, so the worker can reach the API.

Then it starts the program after ``--`` (``opencode serve``), passes
SIGTERM/SIGINT on to it, and exits with its status. It is run by the system's
``/usr/bin/python3 -I`` (isolated: no user site, no environment variables
read), so it must import nothing outside the standard library.

    python3 -I bridge.py SOCKET_DIR PROVIDER_PORT SERVE_PORT -- PROGRAM ARGS...
    python3 -I bridge.py --probe     (prints "ok": the sandbox can run it)
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["join", "main", "pump"]

_CHUNK = 64 * 1024


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src ends, then half-close dst."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def join(a: socket.socket, b: socket.socket) -> None:
    """Carry bytes both ways between two connected sockets, then close both."""
    back = threading.Thread(target=pump, args=(b, a), daemon=True)
    back.start()
    pump(a, b)
    back.join()
    a.close()
    b.close()


def _connect_unix(path: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    return conn


def _connect_tcp(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _serve(listener: socket.socket, target: str | int) -> None:
    """Accept forever; each connection is joined to a fresh one to ``target``."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            upstream = _connect_unix(target) if isinstance(target, str) else _connect_tcp(target)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        threading.Thread(target=join, args=(client, upstream), daemon=True).start()


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        sys.stdout.write("ok\n")
        return 0
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write(__doc__ or "")
        return 2
    folder, provider_port, serve_port, program = argv[0], int(argv[1]), int(argv[2]), argv[4:]

    provider = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    provider.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    provider.bind(("127.0.0.1", provider_port))
    provider.listen(64)
    api_path = Path(folder) / "api.sock"
    api_path.unlink(missing_ok=True)
    api = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    api.bind(str(api_path))
    api.listen(64)
    provider_path = str(Path(folder) / "provider.sock")
    for listener, target in ((provider, provider_path), (api, serve_port)):
        threading.Thread(target=_serve, args=(listener, target), daemon=True).start()

    child = subprocess.Popen(program)  # inherits stdout: the "listening on" line

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell says it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
