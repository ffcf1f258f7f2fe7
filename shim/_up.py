"""``gatehouse up``: the shim and N workers as real processes, supervised.

A worker that dies is started again under the same executor id, so DBOS
recovers its unfinished workflows on start. Ctrl-C (or SIGTERM) stops all.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

from shim._procs import start_shim, start_worker, stop, wait_healthy

__all__ = ["run_up"]


def run_up(database_url: str, port: int, workers: int, var_dir: Path) -> int:
    var_dir.mkdir(parents=True, exist_ok=True)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    base = f"http://127.0.0.1:{port}"
    shim = start_shim(database_url, port, var_dir / "shim.log")
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
