"""``gatehouse up``: the shim and N workers as real processes, supervised.

A worker that dies is started again under the same executor id, so DBOS
recovers its unfinished workflows on start. Ctrl-C (or SIGTERM) stops all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from contracts import Role
from shim._auth import add_token
from shim._procs import start_shim, start_worker, stop, wait_healthy

__all__ = ["run_up"]


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


def run_up(database_url: str, port: int, workers: int, var_dir: Path) -> int:
    var_dir.mkdir(parents=True, exist_ok=True)
    tokens_file = _tokens(var_dir)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    base = f"http://127.0.0.1:{port}"
    shim = start_shim(database_url, port, var_dir / "shim.log", tokens_file)
    wait_healthy(base, shim)
    print(f"gatehouse up: shim on {base} (log {var_dir}/shim.log)", flush=True)
    slots: dict[str, subprocess.Popen[bytes]] = {}
    restarts: dict[str, int] = {}

    def spawn(executor_id: str) -> None:
        slots[executor_id] = start_worker(
            database_url, executor_id, var_dir / "workspaces", var_dir / f"{executor_id}.log"
        )
        print(f"gatehouse up: worker {executor_id} pid {slots[executor_id].pid}", flush=True)

    for n in range(1, workers + 1):
        spawn(f"worker-{n}")
    try:
        while not stopping.wait(0.5):
            if shim.poll() is not None:
                print(f"gatehouse up: the shim exited ({shim.returncode}); stopping", flush=True)
                return 1
            for executor_id, proc in list(slots.items()):
                if proc.poll() is not None:
                    restarts[executor_id] = restarts.get(executor_id, 0) + 1
                    delay = min(30.0, 0.5 * 2 ** min(restarts[executor_id], 6))
                    print(
                        f"gatehouse up: worker {executor_id} exited ({proc.returncode});"
                        f" restarting in {delay:.1f} s",
                        flush=True,
                    )
                    time.sleep(delay)
                    spawn(executor_id)
        return 0
    finally:
        stop([shim, *slots.values()])
        print("gatehouse up: stopped", flush=True)
