"""Starting Gatehouse's own processes: workers and the shim, as real OS processes.

The shim never imports ``worker``; it starts ``python -m worker`` like any
other program would. The shim itself is served one way, whoever starts it
(``gatehouse up``, the demo, ``gatehouse shim`` in the foreground): uvicorn
running ``shim.api.asgi:app`` over h11 with the head limit the door's header
limits sit below (``shim_command``).
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import httpx

from ledger import Tls
from shim.settings import H11_MAX_HEAD_BYTES

__all__ = [
    "ASGI_APP",
    "free_port",
    "serve_shim",
    "served_certificate",
    "shim_command",
    "start_shim",
    "start_worker",
    "stop",
    "wait_healthy",
]

# What uvicorn serves: the app built from the environment's settings.
ASGI_APP = "shim.api.asgi:app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def start_worker(
    database_url: str,
    executor_id: str,
    workspace_root: Path,
    log: Path,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = _env(
        {
            "GATEHOUSE_DATABASE_URL": database_url,
            "GATEHOUSE_EXECUTOR_ID": executor_id,
            "GATEHOUSE_WORKSPACE_ROOT": str(workspace_root),
            # each worker's OpenCode HOME lives beside the workspaces
            "GATEHOUSE_OPENCODE_STATE": os.environ.get("GATEHOUSE_OPENCODE_STATE")
            or str(workspace_root.parent / "opencode"),
            **(extra_env or {}),
        }
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


SHIM_GRACE_S = 3  # how long a stopping shim waits for its open requests


def shim_command(
    host: str,
    port: int,
    tls: Tls | None,
    *,
    log_level: str | None,
    app: str = ASGI_APP,
    processes: int = 1,
) -> list[str]:
    """The argv that serves the shim on ``host``:``port`` (HTTPS with ``tls``); ``app``:
    the ASGI application (another release's, for an upgrade test). ``processes`` above
    one: that many shim processes accept on the one port (uvicorn's workers, each an
    application of its own), under a parent that restarts one that dies."""
    quiet = ["--log-level", log_level] if log_level else []
    several = ["--workers", str(processes)] if processes > 1 else []
    served_tls = ["--ssl-certfile", str(tls.cert), "--ssl-keyfile", str(tls.key)] if tls else []
    return [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        host,
        "--port",
        str(port),
        *quiet,
        "--http",
        "h11",
        "--h11-max-incomplete-event-size",
        str(H11_MAX_HEAD_BYTES),
        # open event streams and long polls are cut after this at a stop, well inside
        # the supervisor's grace (stop): an idle stack is never killed
        "--timeout-graceful-shutdown",
        str(SHIM_GRACE_S),
        *served_tls,
        *several,
    ]


def start_shim(
    database_url: str,
    port: int,
    log: Path,
    tokens_file: Path,
    tls: Tls | None = None,
    *,
    extra_env: dict[str, str] | None = None,
    cwd: Path | None = None,
    app: str = ASGI_APP,
    host: str = "127.0.0.1",
) -> subprocess.Popen[bytes]:
    """The shim on ``host``:``port`` (loopback unless told) in the background, logging
    to ``log``.

    ``cwd``: the folder uvicorn imports the shim from (and reads dbos-config.yaml in);
    by default this process's own, an upgrade test names another release's tree (and,
    ``app``, where that release kept its ASGI application)."""
    env = _env(
        {
            "GATEHOUSE_DATABASE_URL": database_url,
            "GATEHOUSE_TOKENS_FILE": str(tokens_file),
            **(extra_env or {}),
        }
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            shim_command(host, port, tls, log_level="warning", app=app),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )


def serve_shim(
    database_url: str,
    host: str,
    port: int,
    tokens_file: Path,
    tls: Tls | None = None,
    *,
    processes: int = 1,
) -> NoReturn:
    """Become the shim, in the foreground (``gatehouse shim``): this process is replaced."""
    env = _env({"GATEHOUSE_DATABASE_URL": database_url, "GATEHOUSE_TOKENS_FILE": str(tokens_file)})
    argv = shim_command(host, port, tls, log_level=None, processes=processes)
    os.execve(sys.executable, argv, env)  # noqa: S606  (a fixed argv, no shell)


def served_certificate(tls: Tls) -> ssl.SSLContext:
    """A client context that trusts exactly the certificate this shim serves (its first
    in the file, as an anchor of its own), without checking the name: for the local
    liveness probe of a shim started here, which a CA-issued name would not match."""
    context = ssl.create_default_context(cafile=str(tls.cert))
    context.check_hostname = False
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def wait_healthy(
    base_url: str, proc: subprocess.Popen[bytes], timeout: float = 60, tls: Tls | None = None
) -> None:
    deadline = time.monotonic() + timeout
    verify: ssl.SSLContext | bool = served_certificate(tls) if tls else True
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the shim exited with code {proc.returncode} while starting")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the shim at {base_url} did not become healthy in {timeout:.0f} s")


def stop(procs: list[subprocess.Popen[bytes]], grace: float = 10) -> list[int]:
    """SIGTERM each, then SIGKILL those still running after ``grace``; the pids killed."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    killed = []
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            killed.append(p.pid)
    return killed
