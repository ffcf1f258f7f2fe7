"""The process harness: a private PostgreSQL (or a given SQLite file), the shim and
worker slots as real processes.

Everything Gatehouse runs here is a separate OS process, started the way
``gatehouse up`` starts them (``shim.local``). The harness supervises the
worker slots itself: a slot that dies is started again under the same
executor id and without any crash point, unless it was killed for good.

Every HTTP answer is counted (``tests/chaos/client.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from contracts import Role
from shim.local import free_port, start_shim, start_worker, stop, wait_healthy
from shim.tokens import add_token
from tests.chaos.client import Api, Figures, say
from tests.chaos.sink import Sink
from tests.support.pgcluster import PgCluster
from tests.support.stack import GENEROUS_LIMITS
from tests.support.tcp_proxy import TcpProxy

__all__ = [
    "DB_NAME",
    "SLOTS",
    "WORKER_ENV",
    "Slot",
    "Stack",
    "Workers",
    "running_stack",
]

DB_NAME = "gh_chaos"
TABLESPACE = "gh_small"  # running_stack(tablespace=...): where DB_NAME lives
# The worker slots; the last is the one killed for good.
SLOTS = ("w1", "w2", "w3")
# Quick heartbeats so a slot killed for good is handed over within seconds.
WORKER_ENV = {
    "GATEHOUSE_HEARTBEAT_S": "0.5",
    "GATEHOUSE_DEAD_AFTER_S": "4",
    "GATEHOUSE_QUEUE_POLL_S": "0.2",
}

# Who the harness acts as: four-eyes holds (the submitter never decides).
IDENTITIES: dict[str, list[Role]] = {
    "submitter": [Role.SUBMITTER],
    "submitter-b": [Role.SUBMITTER],
    "approver-a": [Role.APPROVER],
    "approver-b": [Role.APPROVER],
    "operator": [Role.OPERATOR],
}


@dataclass
class Slot:
    executor_id: str
    proc: subprocess.Popen[bytes]
    crash_point: str | None
    started: float
    log: Path  # this process's own log
    killed: bool = False  # the harness sent SIGKILL (already counted)
    retired: bool = False  # killed for good: never started again
    hold: bool = False  # do not restart yet (a phase is inspecting what it left)


class Workers:
    """Worker slots, each a real ``python -m worker`` process, restarted when they die."""

    def __init__(
        self,
        database_url: str,
        root: Path,
        figures: Figures,
        env: dict[str, str],
        workspace_root: Path | None = None,
    ) -> None:
        self.database_url = database_url
        self.root = root
        self.figures = figures
        self.env = env
        self.workspace_root = workspace_root or root / "workspaces"
        self.slots: dict[str, Slot] = {}
        self.lock = threading.RLock()
        self.on_crash: Callable[[Slot], None] | None = None
        self._starts = 0
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="chaos-monitor", daemon=True)

    def start(
        self,
        executor_id: str,
        crash_point: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Slot:
        env = dict(self.env)
        env.update(extra_env or {})
        if crash_point is not None:
            env["GATEHOUSE_CRASH_POINT"] = crash_point
        with self.lock:
            self._starts += 1
            log = self.root / "logs" / f"{executor_id}-{self._starts:04d}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            proc = start_worker(self.database_url, executor_id, self.workspace_root, log, env)
            slot = Slot(executor_id, proc, crash_point, time.monotonic(), log)
            self.slots[executor_id] = slot
            return slot

    def live(self) -> list[Slot]:
        with self.lock:
            return [s for s in self.slots.values() if not s.retired and s.proc.poll() is None]

    def kill(self, executor_id: str, kind: str) -> bool:
        """SIGKILL one slot (counted as a kill of ``kind``); the monitor restarts it."""
        with self.lock:
            slot = self.slots.get(executor_id)
            if slot is None or slot.retired or slot.proc.poll() is not None:
                return False
            slot.killed = True
            os.kill(slot.proc.pid, signal.SIGKILL)
        slot.proc.wait()
        self.figures.add(f"kills_{kind}")
        return True

    def retire(self, executor_id: str) -> None:
        """Kill a slot for good: the reaper in a live worker must hand its runs over."""
        with self.lock:
            slot = self.slots[executor_id]
            slot.retired = True
            if slot.proc.poll() is None:
                os.kill(slot.proc.pid, signal.SIGKILL)
        slot.proc.wait()
        self.figures.add("kills_for_good")

    def replace(self, executor_id: str, crash_point: str | None, extra_env: dict[str, str]) -> Slot:
        """Stop a slot gracefully and start it again with other settings."""
        with self.lock:
            old = self.slots.get(executor_id)
            if old is not None:
                old.hold = True
        if old is not None:
            stop([old.proc])
        return self.start(executor_id, crash_point, extra_env)

    def pause(self, executor_id: str) -> None:
        """Stop a slot gracefully and keep it stopped until ``replace`` starts it again."""
        with self.lock:
            slot = self.slots[executor_id]
            slot.hold = True
        stop([slot.proc])

    def wait_ready(self, executor_ids: list[str], timeout: float = 120) -> None:
        """Until each slot's current process has logged that it is ready."""
        deadline = time.monotonic() + timeout
        for executor_id in executor_ids:
            while not self.ready(executor_id):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {executor_id} did not become ready")
                time.sleep(0.1)

    def ready(self, executor_id: str) -> bool:
        with self.lock:
            slot = self.slots[executor_id]
        if slot.proc.poll() is not None or not slot.log.exists():
            return False
        return f"worker {executor_id} ready" in slot.log.read_text(errors="replace")

    # ------------------------------------------------------------ supervision
    def run_monitor(self) -> None:
        self._monitor.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            with self.lock:
                dead = [
                    s
                    for s in self.slots.values()
                    if not s.retired and not s.hold and s.proc.poll() is not None
                ]
            for slot in dead:
                self._restart(slot)

    def _restart(self, slot: Slot) -> None:
        code = slot.proc.returncode
        if not slot.killed:
            if code == 137 and slot.crash_point is not None:
                self.figures.add("kills_crash_point")
                say(f"worker {slot.executor_id} reached crash point {slot.crash_point}")
                if self.on_crash is not None:
                    self.on_crash(slot)
            else:
                tail = slot.log.read_text(errors="replace")[-1500:]
                self.figures.add("worker_exits_unexpected")
                self.figures.fail(f"worker {slot.executor_id} exited by itself ({code}): {tail}")
        self.figures.add("worker_restarts")
        self.start(slot.executor_id)

    def stop_all(self) -> None:
        self._stop.set()
        if self._monitor.is_alive():
            self._monitor.join(timeout=5)
        with self.lock:
            procs = [s.proc for s in self.slots.values()]
        stop(procs)


@dataclass
class Stack:
    cluster: PgCluster | None  # None on a SQLite stack (``running_stack(database_url=...)``)
    database_url: str
    sink: Sink
    api: Api
    workers: Workers
    figures: Figures
    root: Path
    shim: subprocess.Popen[bytes]
    # With ``running_stack(proxy=True)``: the proxy the shim and the workers reach
    # PostgreSQL through (``database_url`` names it); the harness's own checks go direct.
    proxy: TcpProxy | None = None

    @property
    def pg(self) -> PgCluster:
        """The private cluster: the PostgreSQL faults need one."""
        if self.cluster is None:
            raise RuntimeError("this stack runs on SQLite: it has no PostgreSQL cluster")
        return self.cluster

    def start_workers(self, executor_ids: list[str]) -> None:
        for executor_id in executor_ids:
            self.workers.start(executor_id)
        self.workers.wait_ready(executor_ids)


@contextlib.contextmanager
def running_stack(
    root: Path,
    worker_env: dict[str, str],
    sink_delay_s: float = 0.0,
    proxy: bool = False,
    shim_env: dict[str, str] | None = None,
    *,
    database_url: str | None = None,
    workspace_root: Path | None = None,
    tablespace: Path | None = None,
) -> Iterator[Stack]:
    """A private cluster (or the database ``database_url`` names, e.g. a SQLite file),
    the sink, the shim; worker slots are started by the caller. ``shim_env`` is given
    to the shim and every worker (settings both read, such as the anchor file).

    With ``proxy`` the shim and the workers are given a database URL through a
    :class:`~tests.support.tcp_proxy.TcpProxy` (``stack.proxy``) whose faults the
    scenario switches; ``stack.pg`` still reaches the cluster directly. With
    ``tablespace`` (an empty folder) Gatehouse's database lives in a tablespace there,
    so a test can fill its filesystem without touching the server's WAL."""
    figures = Figures()
    root.mkdir(parents=True, exist_ok=True)
    both = dict(shim_env or {})
    with contextlib.ExitStack() as hold:
        pg = None if database_url is not None else hold.enter_context(PgCluster())
        sink = hold.enter_context(Sink(delay_s=sink_delay_s))
        if tablespace is not None:
            if pg is None:
                raise ValueError("a tablespace needs the private PostgreSQL cluster")
            pg.create_tablespace(TABLESPACE, tablespace)
        where = TABLESPACE if tablespace is not None else None
        url = pg.create_database(DB_NAME, where) if pg is not None else database_url or ""
        via: TcpProxy | None = None
        if proxy:
            if pg is None:
                raise ValueError("a proxied stack needs the private PostgreSQL cluster")
            via = hold.enter_context(TcpProxy("127.0.0.1", pg.port))
            url = url.replace(f":{pg.port}/", f":{via.port}/", 1)
        tokens_file = root / "tokens.json"
        tokens = {name: add_token(tokens_file, name, roles) for name, roles in IDENTITIES.items()}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {**GENEROUS_LIMITS, **both}
        shim = start_shim(url, port, root / "shim.log", tokens_file, extra_env=env)
        api = Api(base, tokens, figures)
        workers = Workers(url, root, figures, {**worker_env, **both}, workspace_root)
        stack: Stack | None = None
        try:
            wait_healthy(base, shim)
            workers.run_monitor()
            stack = Stack(pg, url, sink, api, workers, figures, root, shim, via)
            yield stack
        finally:
            workers.stop_all()
            # the shim the test left running: one it started in place of this one
            # (an upgrade test serves another release's) is stopped too
            stop([shim] if stack is None else [shim, stack.shim])
            api.close()
