"""The soak: many runs for a long while under ``gatehouse up --workers 3``, with a
worker killed every few minutes, and what the processes and the database hold
sampled all along.

Each sample records, per process (the ``up`` supervisor, the shim, each worker):
resident memory and open files; for the database: its connections and the size
of Gatehouse's and DBOS's tables. At the end every run must have ended and the
shared invariants must hold; the curves and the per-run timings of the first
and last tenth of the runs go into the figures.

``SOAK_RUNS`` and ``SOAK_MINUTES`` set the size (the ``soak`` mise task: 10,000
runs over 60 minutes; the short form in ``check``: 100 over 1).
"""

from __future__ import annotations

import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from shim.local import free_port, stop
from shim.tokens import add_token
from tests.chaos.client import Api, Figures, say
from tests.chaos.crashpoints import wait_until
from tests.chaos.harness import DB_NAME, IDENTITIES, Stack, Workers
from tests.chaos.model import Channel, random_channels
from tests.chaos.scenario import SCALES, Scenario
from tests.chaos.sink import Sink
from tests.support.pgcluster import PgCluster
from tests.support.stack import GENEROUS_LIMITS

__all__ = ["SoakSize", "run_soak", "soak_size"]

_WORKER_PID = re.compile(r"worker (worker-\d+) pid (\d+)")
WORKERS = 3
# Quick heartbeats, as in the chaos suite, so a killed worker's runs move on.
_ENV = {
    **GENEROUS_LIMITS,
    "GATEHOUSE_HEARTBEAT_S": "0.5",
    "GATEHOUSE_DEAD_AFTER_S": "4",
    "GATEHOUSE_QUEUE_POLL_S": "0.2",
}


@dataclass(frozen=True)
class SoakSize:
    runs: int
    minutes: float
    kill_every_s: float
    sample_every_s: float


def soak_size() -> SoakSize:
    runs = int(os.environ.get("SOAK_RUNS", "100"))
    minutes = float(os.environ.get("SOAK_MINUTES", "1"))
    if runs < 20 or minutes <= 0:
        raise ValueError(
            f"SOAK_RUNS must be at least 20 and SOAK_MINUTES positive: {runs}, {minutes}"
        )
    seconds = minutes * 60
    # A kill every few minutes in the long form; at least two in any form.
    kill_every = min(180.0, seconds / 3)
    return SoakSize(runs, minutes, kill_every, max(2.0, min(30.0, seconds / 40)))


@dataclass
class Sampler:
    """Samples the processes under ``up`` and the database, every few seconds."""

    pg: PgCluster
    up: subprocess.Popen[bytes]
    log: Path
    every_s: float
    started: float = field(default_factory=time.monotonic)
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            try:
                self.samples.append(self.sample())
            except Exception as exc:
                say(f"soak sample failed: {exc}")
            if self._stop.wait(self.every_s):
                return

    def sample(self) -> dict[str, Any]:
        procs = _processes(self.up.pid, self.log)
        rss: dict[str, int] = {}
        fds: dict[str, int] = {}
        for name, pid in procs.items():
            kb = _rss_kb(pid)
            if kb is not None:
                rss[name] = kb
                fds[name] = _open_files(pid)
        conns = self.pg.query(
            "postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = :d", d=DB_NAME
        )
        size = self.pg.query(
            DB_NAME,
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
        )
        done = self.pg.query(
            DB_NAME, "SELECT count(*) FROM gatehouse.runs WHERE finished_at IS NOT NULL"
        )
        return {
            "t_s": round(time.monotonic() - self.started, 1),
            "rss_kb": rss,
            "open_files": fds,
            "db_connections": int(str(conns[0][0])),
            "table_bytes": int(str(size[0][0])),
            "runs_finished": int(str(done[0][0])),
        }


def _processes(up: int, log: Path) -> dict[str, int]:
    """``up``, each worker it last started (from its log) and the shim (its other child)."""
    workers = _pids(log)
    found = {"up": up, **workers}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in workers.values():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == up:
            found["shim"] = int(entry.name)
    return found


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


@contextmanager
def up_stack(root: Path) -> Iterator[tuple[Stack, subprocess.Popen[bytes], Path]]:
    """A private cluster, the sink and ``gatehouse up --workers 3`` on it."""
    figures = Figures()
    root.mkdir(parents=True, exist_ok=True)
    with PgCluster() as pg, Sink(delay_s=0.05) as sink:
        url = pg.create_database(DB_NAME)
        tokens_file = root / "tokens.json"
        tokens = {name: add_token(tokens_file, name, roles) for name, roles in IDENTITIES.items()}
        port = free_port()
        var = root / "var"
        log = root / "up.log"
        gatehouse = Path(sys.executable).parent / "gatehouse"
        env = {**os.environ, **_ENV, "GATEHOUSE_TOKENS_FILE": str(tokens_file)}
        with log.open("wb") as out:
            up = subprocess.Popen(
                [str(gatehouse), "up", "--database-url", url, "--port", str(port),
                 "--workers", str(WORKERS), "--var", str(var)],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        api = Api(f"http://127.0.0.1:{port}", tokens, figures)
        # The slots are ``up``'s to supervise; the harness's own stay empty.
        workers = Workers(url, root, figures, {})
        try:
            wait_until(lambda: len(_pids(log)) == WORKERS, 120, "up to start its workers")
            wait_until(
                lambda: (
                    all(
                        "ready" in (var / f"worker-{n}.log").read_text(errors="replace")
                        for n in range(1, WORKERS + 1)
                        if (var / f"worker-{n}.log").exists()
                    )
                    and len(list(var.glob("worker-*.log"))) == WORKERS
                ),
                120,
                "the workers to be ready",
            )
            yield Stack(pg, url, sink, api, workers, figures, root, up), up, log
        finally:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stop([up])
            api.close()


def _pids(log: Path) -> dict[str, int]:
    if not log.exists():
        return {}
    return {m.group(1): int(m.group(2)) for m in _WORKER_PID.finditer(log.read_text())}


def _seconds(start: object, end: object) -> float | None:
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _timings(pg: PgCluster) -> dict[str, Any]:
    """Approval to end, per run in the order approved: first tenth against last tenth."""
    rows = pg.query(
        DB_NAME,
        "SELECT a.decided_at, r.finished_at FROM gatehouse.runs r"
        " JOIN gatehouse.plan_approvals a ON a.run_id = r.run_id"
        " WHERE a.decision = 'approved' AND r.finished_at IS NOT NULL ORDER BY a.decided_at",
    )
    spans = [s for s in (_seconds(a, f) for a, f in rows) if s is not None]
    tenth = max(1, len(spans) // 10)
    first, last = spans[:tenth], spans[-tenth:]

    def summary(xs: list[float]) -> dict[str, float]:
        ordered = sorted(xs)
        return {
            "median_s": round(statistics.median(ordered), 3),
            "p95_s": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        }

    if not spans:
        return {"runs": 0}
    head, tail = summary(first), summary(last)
    return {
        "runs": len(spans),
        "first_tenth": head,
        "last_tenth": tail,
        "median_ratio_last_to_first": round(tail["median_s"] / max(head["median_s"], 1e-3), 2),
    }


def _curves(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each curve at up to 12 points, and its first and last quarter's medians."""
    if not samples:
        return {}

    def worker_rss(s: dict[str, Any]) -> int:
        return sum(v for k, v in s["rss_kb"].items() if k.startswith("worker"))

    def worker_fds(s: dict[str, Any]) -> int:
        return sum(v for k, v in s["open_files"].items() if k.startswith("worker"))

    series = {
        "workers_rss_mb": [round(worker_rss(s) / 1024, 1) for s in samples],
        "shim_rss_mb": [round(s["rss_kb"].get("shim", 0) / 1024, 1) for s in samples],
        "workers_open_files": [worker_fds(s) for s in samples],
        "shim_open_files": [s["open_files"].get("shim", 0) for s in samples],
        "db_connections": [s["db_connections"] for s in samples],
        "table_mb": [round(s["table_bytes"] / 2**20, 1) for s in samples],
        "runs_finished": [s["runs_finished"] for s in samples],
    }
    step = max(1, len(samples) // 12)
    picked = list(range(0, len(samples), step))
    if picked[-1] != len(samples) - 1:
        picked.append(len(samples) - 1)
    quarter = max(1, len(samples) // 4)
    out: dict[str, Any] = {"t_s": [samples[i]["t_s"] for i in picked]}
    for name, values in series.items():
        out[name] = [values[i] for i in picked]
        out[f"{name}_first_quarter_median"] = statistics.median(values[:quarter])
        out[f"{name}_last_quarter_median"] = statistics.median(values[-quarter:])
        out[f"{name}_max"] = max(values)
    finished = series["runs_finished"][-1]
    out["table_bytes_per_run"] = round(samples[-1]["table_bytes"] / max(1, finished))
    return out


def run_soak(root: Path, size: SoakSize, seed: int) -> dict[str, Any]:
    """Submit ``size.runs`` runs spread over ``size.minutes``, kill a worker every
    ``size.kill_every_s``, sample all along, then settle and check everything."""
    from tests.chaos.invariants import settle_and_check

    with up_stack(root) as (stack, up, log):
        scenario = Scenario(stack, SCALES["ci"], seed)
        rng = random.Random(seed)
        channels = [Channel.NOTE, Channel.KEYED, Channel.UNKEYED]
        sampler = Sampler(stack.pg, up, log, size.sample_every_s)
        window = size.minutes * 60
        say(f"soak: {size.runs} runs over {window:.0f} s, a worker killed every"
            f" {size.kill_every_s:.0f} s, a sample every {size.sample_every_s:.0f} s")  # fmt: skip
        scenario.resolver.start()
        sampler.start()
        kills = 0
        started = time.monotonic()
        try:
            next_kill = started + size.kill_every_s
            with ThreadPoolExecutor(4) as pool:
                pending = []
                for n in range(size.runs):
                    due = started + window * n / size.runs
                    while (now := time.monotonic()) < due:
                        if now >= next_kill:
                            kills += _kill_one(log, rng)
                            next_kill += size.kill_every_s
                        time.sleep(min(0.05, due - now))
                    planned = scenario.plan(random_channels(rng, channels, 1, 3))
                    approve = rng.random() >= 0.03
                    pending.append(pool.submit(_submit, scenario, planned, approve))
                    if n and n % max(1, size.runs // 10) == 0:
                        say(f"soak: {n}/{size.runs} submitted, {kills} kill(s),"
                            f" {time.monotonic() - started:.0f} s")  # fmt: skip
                for future in pending:
                    future.result()
            while time.monotonic() - started < window:
                time.sleep(0.5)
            # Sampled until every run ended; the checking after it is not the load.
            scenario.settle(600 + size.runs * 0.05)
            sampler.stop()
            results = settle_and_check(scenario, 60)
        finally:
            scenario.resolver.stop()
            sampler.stop()
        results["soak"] = {
            "runs_asked": size.runs,
            "minutes": size.minutes,
            "worker_kills": kills,
            "wall_s": round(time.monotonic() - started, 1),
            "samples": len(sampler.samples),
            "curves": _curves(sampler.samples),
            "timings": _timings(stack.pg),
            "restarts_by_up": log.read_text(errors="replace").count("restarting in"),
        }
        results["raw_samples"] = sampler.samples
        return results


def _submit(scenario: Scenario, planned: Any, approve: bool) -> None:
    try:
        run_id = scenario.submit(planned)
        scenario.decide(run_id, approve=approve)
    except (TimeoutError, AssertionError) as exc:
        scenario.figures.fail(f"soak submit {planned.tag}: {exc}")


def _kill_one(log: Path, rng: random.Random) -> int:
    pids = _pids(log)
    name = rng.choice(sorted(pids))
    try:
        os.kill(pids[name], signal.SIGKILL)
    except ProcessLookupError:
        return 0
    say(f"soak: kill -9 {name} (pid {pids[name]})")
    return 1
