"""One ``opencode serve`` per worker: started, watched, restarted, stopped.

The server listens on loopback only, behind a password generated for this
start (HTTP basic auth, user ``opencode``), with its own ``HOME`` under the
worker's state directory, so its database, snapshots and caches belong to
this worker alone and outlive a restart (a turn cut off by a crash can be
reconciled from them). Readiness is the server's own "listening on" line.

A watchdog thread restarts a server that died; a server left behind by a
worker that was killed is found by its pid file and stopped before a new
one starts.

Where the worker can make one, the server runs in a bubblewrap sandbox
(``worker/sandbox/server.py``): it can write only its HOME and the workspace
root, and its network is a bridge to the model provider and nothing else; the
worker reaches its API through the bridge at the same kind of loopback URL.
``sandbox`` says what the server runs in (recorded in every turn's output).
Where none can be made the server runs as a plain process, and the callers
refuse OpenCode work unless the profile allows it (``unsandboxed_opencode``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from contracts import ErrorCode, GatehouseError, JsonObject, OpencodePolicy
from worker.handlers.opencode.config import server_config
from worker.handlers.opencode.pin import OpencodePin, binary, installed_pin
from worker.sandbox.server import Jail, server_sandbox

__all__ = ["OpencodeServer", "ServerSpec", "running_server", "stop_running_server"]

_log = logging.getLogger("gatehouse.opencode")
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
_READY_TIMEOUT_S = 60.0
_WATCH_EVERY_S = 1.0


# A fresh OpenCode home would install @opencode-ai/plugin into its config folder
# from the npm registry (in the background, at every start until it has). Its
# provider package needs nothing: 1.18.33 has @ai-sdk/openai-compatible built in.
REGISTRY_ENV = "GATEHOUSE_OPENCODE_NPM_REGISTRY"
DEAD_REGISTRY = "http://127.0.0.1:9/"
_SEEDED = ("@opencode-ai/plugin",)


def seed_config_dir(folder: Path, opencode_dir: Path) -> None:
    """Give OpenCode's config folder the packages it would fetch, from the pinned
    install in ``opencode_dir`` (set-up installed them with their integrity checked):
    a package.json and lock naming them, and node_modules linking to them, which is
    what OpenCode checks before it installs anything there."""
    wanted = json.loads((opencode_dir / "package.json").read_text("utf-8"))["dependencies"]
    deps = {name: str(wanted[name]) for name in _SEEDED}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"dependencies": deps}), "utf-8")
    lock = {"name": "opencode", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"dependencies": deps}}}  # fmt: skip
    (folder / "package-lock.json").write_text(json.dumps(lock), "utf-8")
    for name in deps:
        link = folder / "node_modules" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to((opencode_dir / "node_modules" / name).resolve())


@dataclass(frozen=True)
class ServerSpec:
    opencode_dir: Path  # vendor/opencode: pin.json and node_modules
    home: Path  # this worker's own HOME for the server
    workspace_root: Path  # where the runs' workspaces are: the sandbox's writable place
    model_url: str
    model: str
    api_key: str | None
    # the permissions in the server's own config (each session sets its own too)
    policy: OpencodePolicy = field(default_factory=OpencodePolicy)


class OpencodeServer:
    """A supervised ``opencode serve``; ``url`` and ``password`` once started."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.pin: OpencodePin = installed_pin(spec.opencode_dir)
        self.url = ""
        self.password = ""
        self.sandbox: JsonObject = {}
        self._jail: Jail | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    def ensure_running(self) -> OpencodeServer:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            if self._watchdog is None:
                self._watchdog = threading.Thread(
                    target=self._watch, name="opencode-watchdog", daemon=True
                )
                self._watchdog.start()
        return self

    def alive(self) -> bool:
        with self._lock:
            return self._proc is not None and self._proc.poll() is None

    def pid(self) -> int | None:
        with self._lock:
            return None if self._proc is None else self._proc.pid

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._pidfile().unlink(missing_ok=True)
        self._close_jail()

    def _close_jail(self) -> None:
        with self._lock:
            jail, self._jail = self._jail, None
        if jail is not None:
            jail.close()

    def _pidfile(self) -> Path:
        return self.spec.home / "opencode.pid"

    def _stop_leftover(self) -> None:
        """A server from a worker that was killed still runs on this HOME: stop it."""
        try:
            pid = int(self._pidfile().read_text("ascii").strip())
        except (OSError, ValueError):
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if b"opencode" not in cmdline or b"serve" not in cmdline:
            return  # the pid was reused by something else
        _log.warning("opencode: stopping the server left behind by a killed worker (pid %d)", pid)
        os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)

    def _start(self) -> None:
        spec = self.spec
        spec.home.mkdir(parents=True, exist_ok=True)
        seed_config_dir(spec.home / ".config" / "opencode", spec.opencode_dir)
        self._stop_leftover()
        self._close_jail()
        password = secrets.token_urlsafe(24)
        port = _free_port()  # `--port 0` means OpenCode's fixed default, not "any"
        model_url, jail = spec.model_url, None
        found = server_sandbox()
        if isinstance(found, str):
            self.sandbox = {"tool": "none", "reason": found}
        else:
            spec.workspace_root.mkdir(parents=True, exist_ok=True)
            jail = Jail(
                found,
                install=spec.opencode_dir / "node_modules",
                home=spec.home,
                workspace_root=spec.workspace_root,
                provider_url=spec.model_url,
            )
            model_url, port = jail.route.inside_url, jail.serve_port
        config = server_config(model_url, spec.model, spec.api_key, spec.policy)
        env = {
            # only what OpenCode needs: none of the worker's own environment
            "PATH": "/usr/bin:/bin" if jail else os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(spec.home),
            "XDG_CONFIG_HOME": str(spec.home / ".config"),
            "XDG_DATA_HOME": str(spec.home / ".local" / "share"),
            "XDG_STATE_HOME": str(spec.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(spec.home / ".cache"),
            "OPENCODE_SERVER_PASSWORD": password,
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            # the models.dev catalogue (data): the provider's models are in the config
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            # nothing is installed from a registry: an install the seed missed fails
            **dict.fromkeys(
                ("npm_config_registry", "NPM_CONFIG_REGISTRY", "BUN_CONFIG_REGISTRY"),
                os.environ.get(REGISTRY_ENV) or DEAD_REGISTRY,
            ),
            "NO_COLOR": "1",
        }
        argv = [str(binary(spec.opencode_dir)), "serve", "--hostname", "127.0.0.1",
                "--port", str(port)]  # fmt: skip
        if jail is not None:
            self._jail = jail
            argv = jail.argv(argv)
            self.sandbox = jail.evidence()
            jail.start_relay()
        log = (spec.home / "server.log").open("ab")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=spec.home,
            env=env,
            start_new_session=True,  # a Ctrl-C for the worker is the worker's to handle
        )
        log.close()
        self._pidfile().write_text(str(proc.pid), "ascii")
        url = self._await_ready(proc)
        if jail is not None:  # the API as the worker reaches it: through the bridge
            url = f"http://127.0.0.1:{jail.relay.port}"
        self._proc, self.url, self.password = proc, url, password
        threading.Thread(target=self._drain, args=(proc,), daemon=True).start()
        _log.info("opencode %s serving at %s (pid %d, sandbox: %s)", self.pin.version, url,
                  proc.pid, self.sandbox.get("tool"))  # fmt: skip

    def _await_ready(self, proc: subprocess.Popen[bytes]) -> str:
        found: list[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                match = _LISTENING.search(raw.decode("utf-8", "replace"))
                if match:
                    found.append(match.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(_READY_TIMEOUT_S)
        if not found:
            proc.kill()
            log = self.spec.home / "server.log"
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE,
                f"opencode serve did not become ready within {_READY_TIMEOUT_S:.0f} s"
                f" (exit {proc.poll()}); see {log}",
            )
        return found[0]

    @staticmethod
    def _drain(proc: subprocess.Popen[bytes]) -> None:
        """Keep reading its stdout so a chatty server never blocks on a full pipe."""
        if proc.stdout is None:
            return
        for _ in iter(proc.stdout.readline, b""):
            pass

    def _watch(self) -> None:
        while not self._stopping.wait(_WATCH_EVERY_S):
            with self._lock:
                proc = self._proc
                if proc is None or proc.poll() is None:
                    continue
                _log.warning("opencode server exited (code %s); restarting it", proc.returncode)
                try:
                    self._start()
                except GatehouseError as exc:
                    _log.error("opencode: restart failed: %s", exc.message)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_servers: dict[Path, OpencodeServer] = {}
_servers_lock = threading.Lock()


def running_server(spec: ServerSpec) -> OpencodeServer:
    """This worker's server, started on first use."""
    with _servers_lock:
        server = _servers.get(spec.home)
        if server is None:
            server = _servers[spec.home] = OpencodeServer(spec)
    return server.ensure_running()


def stop_running_server() -> None:
    """Stop every server this process started (the worker is shutting down)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()
