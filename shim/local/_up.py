"""``gatehouse up``: the shim and N workers as real processes, supervised.

A worker that dies is started again under the same executor id, so DBOS
recovers its unfinished workflows on start. Workers wait for a database that
is not up yet; the shim cannot start without one, so it is tried again until
it can. Ctrl-C (or SIGTERM) stops all. A second stack on the same port or
under executor ids that are live in the database is refused before anything
starts (``StackInUseError``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx

from contracts import Role, stop_on_signals
from ledger import Tls, anchors, database_unreachable, executors, open_database, pending_migrations
from opa_format import DEFAULT_TRUST_DIR
from shim.local._procs import start_shim, start_worker, stop, wait_healthy
from shim.settings import ShimSettings
from shim.stackfile import DEFAULT_VAR, forget_stack, note_stack, process_alive
from shim.tokens import add_token

__all__ = ["StackInUseError", "in_use", "run_up", "stack_env"]

# A dead worker is started again after 0.5 s, doubling per death up to this cap;
# one that had run this long before it died starts the doubling over.
_RESTART_CAP_S = 5.0
_STABLE_S = 60.0
_TOLD_WITH_US_S = 2.0  # how long a worker's clean exit waits for our own stop signal


# What the stack's processes keep in files, by the variable that names each, and where
# its default lies under ./var: under --var it lies at the same place in that folder.
_KEPT_FILES: dict[str, str] = {
    "GATEHOUSE_ANCHOR_FILE": anchors.DEFAULT_ANCHOR_FILE,
    "GATEHOUSE_OPA_TRUST_DIR": DEFAULT_TRUST_DIR,
}


def _under(var_dir: Path, default: str) -> Path:
    return var_dir / Path(default).relative_to(DEFAULT_VAR)


def stack_env(var_dir: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Where the shim and the workers of a stack in ``var_dir`` keep their files (the
    anchor file, the OPA trust store): under ``var_dir``, as absolute paths, unless the
    environment names a place of its own. The tokens file, the logs, the workspaces
    and the OpenCode state are placed by ``run_up`` itself, under the same folder."""
    env = os.environ if environ is None else environ
    root = var_dir.resolve()
    return {
        name: env.get(name) or str(_under(root, default)) for name, default in _KEPT_FILES.items()
    }


def _tokens(var_dir: Path) -> Path:
    """GATEHOUSE_TOKENS_FILE, or a local file made on first start with two people."""
    configured = os.environ.get("GATEHOUSE_TOKENS_FILE")
    if configured:
        return Path(configured)
    path = var_dir / "tokens.json"
    if not path.exists():
        lines = []
        for name, roles in (
            ("local-submitter", [Role.SUBMITTER, Role.OPERATOR]),
            ("local-approver", [Role.APPROVER, Role.OPERATOR]),
        ):
            lines.append(f"{name} {add_token(path, name, roles)}\n")
        keep = var_dir / "local-tokens.txt"
        fd = os.open(keep, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.writelines(lines)
        print(f"gatehouse up: made two local identities; their tokens are in {keep}", flush=True)
    return path


def _start_shim(
    database_url: str,
    port: int,
    var_dir: Path,
    tokens_file: Path,
    stopping: threading.Event,
    *,
    tls: Tls | None = None,
    host: str = "127.0.0.1",
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes] | None:
    """Start the shim and wait until it answers; while the database cannot be reached
    the shim cannot start, so keep trying (backoff capped at 5 s) until it can."""
    base = f"{'https' if tls else 'http'}://{_reach(host)}:{port}"
    log = var_dir / "shim.log"
    attempt = 0
    while not stopping.is_set():
        attempt += 1
        shim = start_shim(database_url, port, log, tokens_file, tls, host=host, extra_env=extra_env)
        try:
            wait_healthy(base, shim, tls=tls)
            return shim
        except RuntimeError as exc:
            stop([shim])
            delay = min(_RESTART_CAP_S, 0.5 * 2 ** min(attempt - 1, 4))
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            # the cause, not uvicorn's "Application startup failed" that follows it
            last = [ln for ln in lines if "Error" in ln and "startup failed" not in ln][-1:]
            print(
                f"gatehouse up: the shim did not start (attempt {attempt}: {exc};"
                f" last error: {last[0][:200] if last else '-'}); retrying in {delay:.1f} s",
                flush=True,
            )
            stopping.wait(delay)
    return None


class StackInUseError(Exception):
    """Why a second stack must not start here; nothing was started or written."""


def in_use(
    database_url: str, port: int, executor_ids: list[str], host: str = "127.0.0.1"
) -> str | None:
    """Why a second stack must not start here (its shim on ``host``:``port``), or None.

    A port that is taken would let this stack's health check reach the other
    stack's shim; an executor id with a live heartbeat would have two workers
    recover each other's runs under one id."""
    held = _port_held(port, host)
    if held:
        return held
    settings = ShimSettings.from_env({**os.environ, "GATEHOUSE_DATABASE_URL": database_url})
    db = open_database(database_url)
    try:
        with db.engine.connect() as conn:
            if pending_migrations(conn):  # a fresh database: no worker has run on it
                return None
            found = executors.list_executors(conn)
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        return None  # the workers wait for the database; nothing to compare with yet
    finally:
        db.dispose()
    # Live as the shim's /workers judges it: a heartbeat (to the tenth of a second)
    # within dead_after_s, neither reaped nor stopped cleanly.
    # A worker of this host whose process is gone is not live, however fresh its last
    # heartbeat: the stack stopped a moment ago is restarted at once.
    here = socket.gethostname()
    live = [
        f"{e.executor_id} (host {e.hostname}, pid {e.pid},"
        f" heartbeat {round(e.heartbeat_age_s, 1)} s ago)"
        for e in found
        if e.live(settings.dead_after_s)
        and e.executor_id in executor_ids
        and not (e.hostname == here and not process_alive(e.pid))
    ]
    if live:
        return (
            f"executor id(s) already live in this database: {'; '.join(live)}. Another"
            " stack runs against it: stop it first, or use another database"
        )
    return None


def _reach(host: str) -> str:
    """Where this machine reaches a shim listening on ``host``, as a URL's host: a
    wildcard is reached on loopback, an IPv6 address in brackets."""
    if host in ("", "0.0.0.0"):  # noqa: S104  (naming the wildcard, not binding it)
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _port_held(port: int, host: str = "127.0.0.1") -> str | None:
    """Why ``host``:``port`` cannot be served, naming what holds it, or None.

    The probe binds as uvicorn does (``SO_REUSEADDR``): a port left in TIME_WAIT by the
    last stack's clients is free to serve at once, only a listener holds it."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        return f"cannot listen on {host}: {exc.strerror}; pass another --host"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
            return None
        except OSError as exc:
            reason = exc.strerror
    if _answers_as_gatehouse(port, host):
        holder = "a Gatehouse shim answers there (another gatehouse up or shim)"
    else:
        holder = "another program listens there (not a Gatehouse shim)"
    return f"port {port} is in use ({reason}): {holder}; stop it, or pass --port"


def _answers_as_gatehouse(port: int, host: str = "127.0.0.1") -> bool:
    for scheme in ("http", "https"):
        url = f"{scheme}://{_reach(host)}:{port}/openapi.json"
        try:
            # only asks who holds a port of this machine; nothing is sent or trusted
            r = httpx.get(url, timeout=2, verify=False)  # noqa: S501
            info = r.json().get("info", {}) if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
        if isinstance(info, dict) and info.get("title") == "Gatehouse":
            return True
    return False


def run_up(
    database_url: str,
    port: int,
    workers: int,
    var_dir: Path,
    tls: Tls | None = None,
    *,
    host: str = "127.0.0.1",
) -> bool:
    """Supervise the shim (on ``host``:``port``, HTTPS with ``tls``) and ``workers``
    workers until stopped: True when stopped (Ctrl-C, SIGTERM), False when the shim
    exited by itself. Whether plain HTTP may be served on ``host`` is the caller's
    check (``shim.settings.plain_http_refusal``)."""
    executor_ids = [f"worker-{n}" for n in range(1, workers + 1)]
    refusal = in_use(database_url, port, executor_ids, host)
    if refusal:
        raise StackInUseError(refusal)
    var_dir.mkdir(parents=True, exist_ok=True)
    tokens_file = _tokens(var_dir)
    stopping = threading.Event()
    stop_on_signals(stopping)
    base = f"{'https' if tls else 'http'}://{_reach(host)}:{port}"
    slots: dict[str, subprocess.Popen[bytes]] = {}
    started: dict[str, float] = {}
    restarts: dict[str, int] = {}
    due: dict[str, float] = {}  # executor id -> when its restart is due

    kept = stack_env(var_dir)

    def spawn(executor_id: str) -> None:
        slots[executor_id] = start_worker(
            database_url,
            executor_id,
            var_dir.resolve() / "workspaces",
            var_dir / f"{executor_id}.log",
            extra_env=kept,
        )
        started[executor_id] = time.monotonic()
        print(f"gatehouse up: worker {executor_id} pid {slots[executor_id].pid}", flush=True)

    shim = _start_shim(
        database_url, port, var_dir, tokens_file, stopping, tls=tls, host=host, extra_env=kept
    )
    if shim is None:
        print("gatehouse up: stopped", flush=True)
        return True
    listening = "" if _reach(host) == host else f", listening on {host}"
    print(f"gatehouse up: shim on {base} (log {var_dir}/shim.log{listening})", flush=True)
    print(f"gatehouse up: dashboard at {base}/dashboard (log in with a token)", flush=True)
    # a second terminal in this folder finds the stack by it (shim.local._stack)
    note_stack(var_dir, database_url, base)
    for n in range(1, workers + 1):
        spawn(f"worker-{n}")
    try:
        while not stopping.wait(0.5):
            if shim.poll() is not None:
                print(f"gatehouse up: the shim exited ({shim.returncode}); stopping", flush=True)
                return False
            now = time.monotonic()
            for executor_id, proc in list(slots.items()):
                if executor_id in due:
                    if now >= due[executor_id]:
                        del due[executor_id]
                        spawn(executor_id)
                    continue
                if proc.poll() is None:
                    continue
                # A worker that stopped as told (exit 0) was most likely told with us: a
                # Ctrl-C reaches the whole process group, and a worker may exit before
                # this loop sees its own signal. Give that signal a moment first.
                if proc.returncode == 0 and stopping.wait(_TOLD_WITH_US_S):
                    break
                # A worker that ran a good while before dying starts the backoff over.
                if now - started[executor_id] > _STABLE_S:
                    restarts[executor_id] = 0
                restarts[executor_id] = restarts.get(executor_id, 0) + 1
                delay = min(_RESTART_CAP_S, 0.5 * 2 ** min(restarts[executor_id] - 1, 6))
                print(
                    f"gatehouse up: worker {executor_id} exited ({proc.returncode});"
                    f" restarting in {delay:.1f} s",
                    flush=True,
                )
                # Not a sleep here: the shim and the other workers stay supervised.
                due[executor_id] = now + delay
        return True
    finally:
        forget_stack(var_dir)
        for pid in stop([shim, *(p for p in slots.values() if p.poll() is None)]):
            print(f"gatehouse up: pid {pid} did not stop in time; killed", flush=True)
        print("gatehouse up: stopped", flush=True)
