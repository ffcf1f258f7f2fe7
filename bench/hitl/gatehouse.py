"""Gatehouse under the benchmark: shim and worker as separate processes, over HTTP.

One run: POST /intent (a ``run-plan`` of ``noop`` steps), wait for the plan card
(``GET /runs/{id}/wait``, answered when the run waits for approval), POST
/approve/{id} with its digest, wait until ``succeeded``. The client does not
poll; how soon the shim answers a waiting client is part of the figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from bench.hitl._counting import read_counts
from bench.hitl.steps import APPROVAL_TO_STEP, SUBMIT_TO_CARD
from contracts import Role
from ledger import open_database
from shim.cli.client import KEEPALIVE
from shim.local import free_port, stop, wait_healthy
from shim.tokens import add_token

__all__ = ["GatehouseSystem"]
# As many runs in flight as the peers get: the worker's queue slots are not the bottleneck.
WORKER_CONCURRENCY = 16


def _plan(steps: int) -> dict[str, Any]:
    return {
        "objective": "bench",
        "steps": [
            {
                "step_id": f"s{n}",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input": {"n": n},
            }
            for n in range(1, steps + 1)
        ],
    }


def _ms_of(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


class GatehouseSystem:
    def __init__(
        self,
        backend: str,
        url: str,
        tmp: Path,
        *,
        worker: bool = True,
        share: int | None = WORKER_CONCURRENCY,
        env: dict[str, str] | None = None,
        shim_processes: int = 1,
    ) -> None:
        """The shim and (unless ``worker`` is False: nothing runs, runs stay queued) a worker.

        ``shim_processes``: how many processes serve the shim's one port (as
        ``gatehouse shim --processes``); above one, its SQL is not counted.

        ``share``: GATEHOUSE_WORKER_SHARE, how many slots one submitter's runs may
        hold; by default every one, as the peers' runs may (the benchmark's runs
        come from one submitter); None: the shipped default."""
        self.backend, self.url = backend, url
        folder = tmp / f"gh-{backend}{'' if worker else '-shim'}"
        folder.mkdir(parents=True)
        tokens = folder / "tokens.json"
        self._sub = {"Authorization": f"Bearer {add_token(tokens, 'bench-sub', [Role.SUBMITTER])}"}
        self._app = {"Authorization": f"Bearer {add_token(tokens, 'bench-ok', [Role.APPROVER])}"}
        # another submitter, for what one submitter's backlog costs the next one's run
        self.other = {
            "Authorization": f"Bearer {add_token(tokens, 'bench-other', [Role.SUBMITTER])}"
        }
        self.count_files = [folder / "shim.counts", folder / "worker.counts"]
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self._folder, self._port = folder, port
        self._env = {
            "GATEHOUSE_DATABASE_URL": url,
            "GATEHOUSE_TOKENS_FILE": str(tokens),
            "GATEHOUSE_EXECUTOR_ID": f"bench-{backend}",
            "GATEHOUSE_WORKSPACE_ROOT": str(folder / "ws"),
            "GATEHOUSE_OPENCODE_STATE": str(folder / "oc"),
            "GATEHOUSE_WORKER_CONCURRENCY": str(WORKER_CONCURRENCY),
        }
        if share is not None:
            self._env["GATEHOUSE_WORKER_SHARE"] = str(share)
        self._env |= env or {}  # more settings, for every process started
        if not worker:
            # Intake alone is measured: the door's per-caller rate limits and the queue's
            # bound (which a shim with no worker fills at once) are lifted for it.
            self._env |= {
                "GATEHOUSE_RATE_PER_IDENTITY": "off",
                "GATEHOUSE_RATE_PER_ADDRESS": "off",
                "GATEHOUSE_MAX_QUEUED": "100000000",
                "GATEHOUSE_MAX_QUEUED_PER_SUBMITTER": "100000000",
            }
        self.procs: list[subprocess.Popen[bytes]] = [
            self._spawn("shim", BENCH_SHIM_PROCESSES=str(shim_processes))
        ]
        self._more_shims: list[int] = []  # pids of the shims add_shim started
        wait_healthy(self.base, self.procs[0])
        if worker:
            self.procs.append(self._spawn("worker"))
        self.client = httpx.Client(base_url=self.base, timeout=60, limits=KEEPALIVE)
        self._callers: list[httpx.Client] = []
        # Retryable error answers the client got and tried again, by status and code.
        self.retried: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _spawn(
        self, role: str, name: str | None = None, port: int | None = None, **env: str
    ) -> subprocess.Popen[bytes]:
        """The shim or a worker as a process of its own; ``name`` (another shim or
        worker beside the first two) its log's and SQL counts' file name."""
        counts = self.count_files[0 if role == "shim" else 1]
        if name is not None:
            counts = self._folder / f"{name}.counts"
            self.count_files.append(counts)
        with (self._folder / f"{name or role}.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "bench.hitl._gh_proc", role, str(port or self._port)],
                env={**os.environ, **self._env, **env, "BENCH_COUNT_FILE": str(counts)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def add_shim(self) -> str:
        """Another shim on the same database, on a port of its own; its base URL."""
        port = free_port()
        self.procs.append(self._spawn("shim", f"shim{len(self.procs)}", port))
        self._more_shims.append(self.procs[-1].pid)
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, self.procs[-1])
        return base

    def add_worker(self) -> None:
        """Another worker on the same database, under an executor id of its own."""
        name = f"worker{len(self.procs)}"
        executor = f"{self._env['GATEHOUSE_EXECUTOR_ID']}-{name}"
        self.procs.append(self._spawn("worker", name, GATEHOUSE_EXECUTOR_ID=executor))

    def kill_worker(self) -> None:
        """SIGKILL the worker (no shutdown of any kind), as a crash would."""
        self.procs[1].kill()
        self.procs[1].wait()

    def restart_worker(self, share: int | None = None) -> None:
        """A new worker process under the same executor id: DBOS recovers its runs;
        with ``share``, a worker given that GATEHOUSE_WORKER_SHARE."""
        if share is not None:
            self._env["GATEHOUSE_WORKER_SHARE"] = str(share)
        self.procs[1] = self._spawn("worker")

    def close(self) -> None:
        for c in [self.client, *self._callers]:
            c.close()
        stop(self.procs)

    def submit(
        self, c: httpx.Client, steps: int = 3, who: dict[str, str] | None = None
    ) -> httpx.Response:
        """POST /intent: a ``run-plan`` of ``steps`` noop steps (retryable answers retried),
        as the benchmark's submitter unless ``who`` (auth headers) says otherwise."""
        return self._call(c, "POST", "/intent", who or self._sub, self.intent_body(steps))

    @staticmethod
    def intent_body(steps: int = 3) -> dict[str, Any]:
        """The benchmark's intent: a ``run-plan`` of ``steps`` noop steps."""
        return {"recipe": "echo", "objective": "bench", "mode": "run-plan", "plan": _plan(steps)}

    @property
    def submitter_headers(self) -> dict[str, str]:
        """The benchmark's submitter's auth header."""
        return dict(self._sub)

    def one_run(
        self, steps: int = 3, client: httpx.Client | None = None, who: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """One run, submit → succeeded; its id, client-side ms and wall-clock end."""
        c = client or self.client
        started = time.perf_counter()
        r = self.submit(c, steps, who)
        run_id = str(r.json()["run_id"])
        run = self.until(run_id, "waiting_approval", c, who)
        self.approve(run_id, run["plan_card"]["plan_digest"], c)
        self.until(run_id, "succeeded", c, who)
        ms = (time.perf_counter() - started) * 1000
        return {"run_id": run_id, "ms": ms, "seen_at_ms": time.time() * 1000}

    def _call(
        self, c: httpx.Client, method: str, path: str, auth: dict[str, str], body: Any = None
    ) -> httpx.Response:
        """One request; an answer marked retryable is tried again (as a client would), counted."""
        deadline = time.monotonic() + 60
        while True:
            r = c.request(method, path, headers=auth, json=body)
            if r.status_code < 400:
                return r
            retryable = r.headers.get("content-type", "").startswith("application/json") and bool(
                r.json().get("error", {}).get("retryable")
            )
            if not retryable or time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
            with self._lock:
                self.retried[f"{r.status_code} {r.json()['error']['code']}"] += 1
            time.sleep(0.05)

    def approve(self, run_id: str, digest: str, client: httpx.Client | None = None) -> None:
        body = {"plan_digest": digest}
        self._call(client or self.client, "POST", f"/approve/{run_id}", self._app, body)

    def until(
        self,
        run_id: str,
        status: str,
        client: httpx.Client | None = None,
        who: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The run once it has ``status`` (long polls); raises if it ends otherwise."""
        c = client or self.client
        deadline = time.monotonic() + 60
        path = f"/runs/{run_id}/wait?until={status}&timeout_s=30"
        while time.monotonic() < deadline:
            run: dict[str, Any] = self._call(c, "GET", path, who or self._sub).json()
            if run["status"] == status:
                return run
            if run["status"] in ("failed", "rejected", "cancelled"):
                raise RuntimeError(f"gatehouse run {run_id} ended {run['status']}: {run}")
        raise RuntimeError(f"gatehouse run {run_id} did not reach {status} in 60 s")

    def in_flight(self, n: int) -> float:
        """n runs submitted at once, each approved when its card appears; runs/s.

        Each of the n callers keeps its HTTP client from one batch to the next, as a
        real client keeps its connection: making an ``httpx.Client`` costs the
        benchmark's process milliseconds of CPU (its TLS context), which is not
        Gatehouse's work and would compete with it for the same two cores."""
        while len(self._callers) < n:
            self._callers.append(httpx.Client(base_url=self.base, timeout=60, limits=KEEPALIVE))
        started = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda c: self.one_run(client=c), self._callers[:n]))
        return n / (time.perf_counter() - started)

    def pids(self) -> list[int]:
        """The shim's and the worker's process ids (the CPU this system is charged)."""
        return [p.pid for p in self.procs]

    def shim_pids(self) -> list[int]:
        """The shims' process ids (the first, and any ``add_shim`` started)."""
        return [self.procs[0].pid, *self._more_shims]

    def counts(self) -> dict[str, dict[str, int]]:
        return {f.stem: read_counts(f) for f in self.count_files}

    def phases(self, runs: list[dict[str, Any]]) -> dict[str, list[float]]:
        """Where each run's time went, in ms, from the rows the run wrote."""
        db = open_database(self.url)
        wf = "dbos.workflow_status" if self.backend == "postgres" else "workflow_status"
        out: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            out.setdefault(name, []).append(value)

        try:
            with db.engine.connect() as conn:
                for run in runs:
                    p = {"r": run["run_id"]}
                    row = conn.execute(
                        sa.text(
                            "SELECT r.created_at, r.finished_at, c.created_at, a.decided_at"
                            " FROM runs r JOIN plan_cards c USING (run_id)"
                            " JOIN plan_approvals a USING (run_id) WHERE r.run_id = :r"
                        ),
                        p,
                    ).one()
                    started = conn.execute(
                        sa.text(f"SELECT started_at_epoch_ms FROM {wf} WHERE workflow_uuid = :r"),
                        p,
                    ).scalar()
                    tools = conn.execute(
                        sa.text(
                            "SELECT started_at, finished_at FROM calls WHERE run_id = :r"
                            " AND kind = 'tool' ORDER BY started_at"
                        ),
                        p,
                    ).all()
                    created, finished, card, decided = (_ms_of(str(v)) for v in row)
                    # SQLite's DBOS rows can carry a start before the submit: not a pickup time.
                    if started is not None and float(started) >= created:
                        add("submit → worker starts the workflow", float(started) - created)
                        add("workflow start → plan card (compile + gate)", card - float(started))
                    add(SUBMIT_TO_CARD, card - created)
                    add("plan card → approval recorded (client woken + POST)", decided - card)
                    add(APPROVAL_TO_STEP, _ms_of(tools[0][0]) - decided)
                    for a, b in tools:
                        add("tool call, claim → completion (each)", _ms_of(b) - _ms_of(a))
                    for (_, b), (a, _) in pairwise(tools):
                        add("between tool calls (each)", _ms_of(a) - _ms_of(b))
                    add("last tool call → run finished", finished - _ms_of(tools[-1][1]))
                    add("run finished → client sees succeeded", run["seen_at_ms"] - finished)
        finally:
            db.dispose()
        return out
