"""Starting Gatehouse's own processes: workers and the shim, as real OS processes.

The shim never imports ``worker``; it starts ``python -m worker`` like any
other program would. The shim itself is served one way, whoever starts it
(``gatehouse up``, the demo, ``gatehouse shim`` in the foreground): uvicorn
running ``shim.api.asgi:app`` over h11 with the head limit the door's header
limits sit below, a deadline on each request head, and no belief in forwarded
headers of its own (``shim_command``).
"""

from __future__ import annotations

import json
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
    "HTTP_PROTOCOL",
    "free_port",
    "serve_shim",
    "served_certificate",
    "shim_command",
    "shim_env",
    "start_shim",
    "start_worker",
    "stop",
    "wait_healthy",
    "worker_env",
]

# What uvicorn serves: the app built from the environment's settings.
ASGI_APP = "shim.api.asgi:app"
# How it speaks HTTP/1.1: uvicorn's h11 protocol with a deadline on the request head
# (GATEHOUSE_HEADER_TIMEOUT_S), which uvicorn does not have.
HTTP_PROTOCOL = "shim.api.serving:HeadTimeoutH11"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def worker_env(
    database_url: str,
    executor_id: str,
    workspace_root: Path,
    extra_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment ``start_worker`` starts a worker with."""
    return _env(
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


def start_worker(
    database_url: str,
    executor_id: str,
    workspace_root: Path,
    log: Path,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = worker_env(database_url, executor_id, workspace_root, extra_env)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


SHIM_GRACE_S = 3  # how long a stopping shim waits for its open requests

# What a shim started in the background writes to its log (var/shim.log under `up`):
# uvicorn's start and stop lines, one line per request (its access log; a query shows
# as ?..., contracts.hide_url_secrets_in_logs), Gatehouse's own lines from INFO up and
# any library's warnings, each stamped. uvicorn's own "warning" level, used before,
# left the file empty on a healthy stack: its start line and access log are INFO.
_STAMP = "%Y-%m-%dT%H:%M:%S%z"
SHIM_LOG_CONFIG: dict[str, object] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "line": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s", "datefmt": _STAMP},
        # uvicorn logs its start and stop to "uvicorn.error", which is no error
        "uvicorn": {"format": "%(asctime)s %(levelname)s uvicorn: %(message)s", "datefmt": _STAMP},
        "access": {
            "()": "uvicorn.logging.AccessFormatter",
            "fmt": '%(asctime)s %(levelname)s access: %(client_addr)s "%(request_line)s"'
            " %(status_code)s",
            "datefmt": _STAMP,
            "use_colors": False,
        },
    },
    "handlers": {
        # one stream: the log file is stdout and stderr alike, and a line is written whole
        "line": {
            "class": "logging.StreamHandler",
            "formatter": "line",
            "stream": "ext://sys.stderr",
        },
        "uvicorn": {
            "class": "logging.StreamHandler",
            "formatter": "uvicorn",
            "stream": "ext://sys.stderr",
        },
        "access": {
            "class": "logging.StreamHandler",
            "formatter": "access",
            "stream": "ext://sys.stderr",
        },
    },
    "loggers": {
        "uvicorn": {"handlers": ["uvicorn"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        "gatehouse": {"handlers": ["line"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["line"], "level": "WARNING"},
}


def shim_command(
    host: str,
    port: int,
    tls: Tls | None,
    *,
    log_level: str | None,
    app: str = ASGI_APP,
    protocol: str = HTTP_PROTOCOL,
    processes: int = 1,
    log_config: Path | None = None,
) -> list[str]:
    """The argv that serves the shim on ``host``:``port`` (HTTPS with ``tls``); ``app``:
    the ASGI application (another release's, for an upgrade test); ``protocol``: the
    HTTP protocol uvicorn speaks (plain ``h11`` for a release without its own).
    ``processes`` above one: that many shim processes accept on the one port (uvicorn's
    workers, each an application of its own), under a parent that restarts one that dies.
    ``log_config``: a JSON file of ``logging.config.dictConfig`` (``SHIM_LOG_CONFIG``)."""
    logging_args = ["--log-level", log_level] if log_level else []
    if log_config is not None:
        logging_args += ["--log-config", str(log_config)]
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
        *logging_args,
        "--http",
        protocol,
        # The app decides which peers' X-Forwarded-For to believe (shim.api.edge,
        # GATEHOUSE_TRUSTED_PROXIES); uvicorn's own default believes any from loopback.
        "--no-proxy-headers",
        "--h11-max-incomplete-event-size",
        str(H11_MAX_HEAD_BYTES),
        # open event streams and long polls are cut after this at a stop, well inside
        # the supervisor's grace (stop): an idle stack is never killed
        "--timeout-graceful-shutdown",
        str(SHIM_GRACE_S),
        *served_tls,
        *several,
    ]


def shim_env(
    database_url: str, tokens_file: Path, extra_env: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment ``start_shim`` starts the shim with."""
    return _env(
        {
            "GATEHOUSE_DATABASE_URL": database_url,
            "GATEHOUSE_TOKENS_FILE": str(tokens_file),
            **(extra_env or {}),
        }
    )


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
    protocol: str = HTTP_PROTOCOL,
    host: str = "127.0.0.1",
) -> subprocess.Popen[bytes]:
    """The shim on ``host``:``port`` (loopback unless told) in the background, logging
    to ``log``.

    ``cwd``: the folder uvicorn imports the shim from (and reads dbos-config.yaml in);
    by default this process's own, an upgrade test names another release's tree (and,
    ``app``, where that release kept its ASGI application, ``protocol``, the HTTP
    protocol it has: plain ``h11`` for one from before ``shim.api.serving``)."""
    env = shim_env(database_url, tokens_file, extra_env)
    # uvicorn reads its logging from a file only; this one sits beside the log it shapes
    log_config = log.with_name(f"{log.stem}-logging.json")
    log_config.write_text(json.dumps(SHIM_LOG_CONFIG, indent=2) + "\n", encoding="utf-8")
    with log.open("ab") as out:
        return subprocess.Popen(
            shim_command(
                host,
                port,
                tls,
                log_level="info",
                app=app,
                protocol=protocol,
                log_config=log_config,
            ),
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
