"""``python -m bench.hitl.cluster``: a cluster on one PostgreSQL — 1, 2 and 4 workers.

Issue 29. For each count of workers, a fresh database, two shims and that many
workers, each a process of its own (shipped settings: 16 slots a worker, a
submitter's share 12), driven over HTTP by callers spread over both shims:

* **idle** — the database's transactions per second with nobody calling: what
  the workers and shims cost it doing nothing;
* **busy** — ``--runs`` template runs (3 noop steps, submitted, approved when the
  card appears, until ``succeeded``) by ``--callers`` closed-loop callers, three
  in four as one submitter and one in four as another: runs per second, CPU per
  run of the shims, the workers and PostgreSQL, the machine's CPU busy, the
  database's transactions per second, how the runs' workflows (their stretches)
  spread over the workers, each submitter's p50, and every run's tool calls exactly once.

Results go between this module's markers in ``--out`` (``docs/benchmarks.md``);
targets are reported, never an exit code. ``--quick`` (2 workers only, a few
runs) proves the harness and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.hitl._db import one, transactions, tx_per_s
from bench.hitl._proc_stats import cpu_s, postgres_cpu_s
from bench.hitl.gatehouse import WORKER_CONCURRENCY, GatehouseSystem
from bench.hitl.report import write_section
from bench.hitl.soak import rows_of_runs, tool_calls_once
from shim.cli.client import KEEPALIVE
from tests.support.stack import drop_database, fresh_database_url, postgres_available
from worker.runtime import default_share

__all__ = ["cluster", "main"]

BEGIN = "<!-- bench:cluster begin -->"
END = "<!-- bench:cluster end -->"
WORKERS = (1, 2, 4)
SHIMS = 2
# Connections each pool of a process keeps (GATEHOUSE_PG_POOL_SIZE): 4 workers and 2
# shims at 10 (130 at most) outgrow the server's default max_connections of 100; at
# 6 they need 82 at most (docs/operators.md, "Sizing").
POOL = 6
IDLE_WINDOW_S = 5.0


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _live_workers(url: str) -> int:
    return int(
        one(
            url,
            "SELECT COUNT(*) FROM executors WHERE reaped_at IS NULL AND stopped_at IS NULL",
        )
        or 0
    )


def _until(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting until {what}")
        time.sleep(0.2)


def cluster(url: str, tmp: Path, workers: int, runs: int, callers: int) -> dict[str, Any]:
    """One configuration measured (see the module)."""
    g = GatehouseSystem(
        "postgres",
        url,
        tmp / f"workers-{workers}",
        share=None,
        env={"GATEHOUSE_PG_POOL_SIZE": str(POOL)},
    )
    clients: list[httpx.Client] = []
    try:
        bases = [g.base] + [g.add_shim() for _ in range(SHIMS - 1)]
        for _ in range(workers - 1):
            g.add_worker()
        _until(lambda: _live_workers(url) >= workers, f"{workers} workers beat")
        for _ in range(3):
            g.one_run()  # warm: every process has served
        time.sleep(2)
        idle_tx = tx_per_s(url, IDLE_WINDOW_S)

        clients = [
            httpx.Client(base_url=bases[i % len(bases)], timeout=60, limits=KEEPALIVE)
            for i in range(callers)
        ]
        # three callers in four are one submitter, the fourth another
        who = [g.other if i % 4 == 3 else None for i in range(callers)]
        left = [runs]
        lock = threading.Lock()
        done: list[tuple[str, str, float]] = []  # (submitter, run id, ms)

        def caller(i: int) -> None:
            while True:
                with lock:
                    if left[0] <= 0:
                        return
                    left[0] -= 1
                r = g.one_run(client=clients[i], who=who[i])
                with lock:
                    done.append(("other" if who[i] else "main", str(r["run_id"]), float(r["ms"])))

        name = url.rsplit("/", 1)[1]
        cpu0 = {p: cpu_s(p) for p in g.pids()}
        pg0, machine0, tx0 = postgres_cpu_s(name), _machine_busy_s(), transactions(url) or 0.0
        started = time.perf_counter()
        with ThreadPoolExecutor(callers) as pool:
            list(pool.map(caller, range(callers)))
        elapsed = time.perf_counter() - started
        tx1 = transactions(url) or 0.0
        pg = postgres_cpu_s(name) - pg0
        machine = _machine_busy_s() - machine0
        used = {p: cpu_s(p) - cpu0[p] for p in g.pids()}
        ids = [r for _, r, _ in done]
        spread = Counter(
            str(row[0])
            for row in rows_of_runs(
                url,
                "SELECT w.executor_id FROM dbos.workflow_status w WHERE w.workflow_uuid IN :r",
                ids + [f"{r}:1" for r in ids],  # a run's first stretch, and its second
            )
        )
        shims = g.shim_pids()
        shim_cpu = sum(used[p] for p in shims)
        worker_cpu = sum(v for p, v in used.items() if p not in shims)
        by = {s: [ms for w, _, ms in done if w == s] for s in ("main", "other")}
        return {
            "workers": workers,
            "shims": SHIMS,
            "callers": callers,
            "runs": len(done),
            "runs_per_s": len(done) / elapsed,
            "idle_tx": idle_tx,
            "busy_tx": max(0.0, tx1 - tx0) / elapsed,
            "cpu_ms": {
                "shims": 1000 * shim_cpu / len(done),
                "workers": 1000 * worker_cpu / len(done),
                "postgres": 1000 * pg / len(done),
            },
            "machine_busy": machine / (elapsed * (os.cpu_count() or 1)),
            "spread": sorted(spread.values()),
            "p50_ms": {s: statistics.median(v) if v else float("nan") for s, v in by.items()},
            "once": tool_calls_once(url, ids),
        }
    finally:
        for c in clients:
            c.close()
        g.close()


def _verdict(scaled: float, busy: float) -> str:
    if scaled >= 3:
        return "yes"
    return "bottleneck: the machine's CPU" if busy > 0.9 else "**missed**"


def section(found: list[dict[str, Any]], quick: bool) -> str:
    ones = [r["runs_per_s"] for r in found if r["workers"] == 1]
    one_worker = ones[0] if ones else None  # a quick run has no 1-worker row
    lines = [
        BEGIN,
        "## A cluster on one database (issue 29)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:cluster` (`bench/hitl/cluster.py`); do not"
        " edit by hand." + (" **Quick run: too few runs to judge; no targets.**" if quick else ""),
        "",
        f"* when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; PostgreSQL 15 on this"
        f" machine ({os.cpu_count()} cores, shared by every process below); {SHIMS} shims and"
        f" 1, 2 or 4 workers as separate processes ({WORKER_CONCURRENCY} slots each, a"
        f" submitter's share {default_share(WORKER_CONCURRENCY)}, `GATEHOUSE_PG_POOL_SIZE`"
        f" {POOL} in every process); a run is 3 noop steps,"
        " submitted, approved when its card appears, until `succeeded`, by closed-loop"
        " callers spread over the shims, three in four as one submitter",
        "",
        "| workers | callers | runs | runs/s | vs 1 worker | CPU ms per run: shims"
        " / workers / PostgreSQL | machine CPU busy | db transactions/s idle → busy"
        " | workflows per worker | p50 ms, main / other submitter | each call once |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in found:
        c = r["cpu_ms"]
        lines.append(
            f"| {r['workers']} | {r['callers']} | {r['runs']} | {r['runs_per_s']:.1f}"
            f" | {_versus(r['runs_per_s'], one_worker)}"
            f" | {c['shims']:.0f} / {c['workers']:.0f} / {c['postgres']:.0f}"
            f" | {100 * r['machine_busy']:.0f} % | {r['idle_tx']:.1f} → {r['busy_tx']:.0f}"
            f" | {' / '.join(str(n) for n in r['spread'])}"
            f" | {r['p50_ms']['main']:.0f} / {r['p50_ms']['other']:.0f}"
            f" | {'yes' if r['once'] else '**no**'} |"
        )
    if not quick and one_worker is not None:
        most = found[-1]
        scaled = most["runs_per_s"] / one_worker
        lines += [
            "",
            "| target (issue 29) | measured | met |",
            "|---|---|---|",
            f"| {most['workers']} workers ≥ 3x one worker's runs/s, or the bottleneck named"
            f" | {scaled:.2f}x; machine CPU {100 * most['machine_busy']:.0f} % busy"
            f" | {_verdict(scaled, most['machine_busy'])} |",
            f"| every run's tool calls exactly once, 0 lost | {sum(r['runs'] for r in found)} runs"
            f" | {'yes' if all(r['once'] for r in found) else '**no**'} |",
        ]
    total = {k: sum(r["cpu_ms"][k] for r in found) / len(found) for k in found[0]["cpu_ms"]}
    lines += [
        "",
        "How to read it: a run costs the machine about"
        f" {sum(total.values()):.0f} ms of CPU in all (shims {total['shims']:.0f}, workers"
        f" {total['workers']:.0f}, PostgreSQL {total['postgres']:.0f}, averaged over the rows),"
        " so one machine of C cores carries at most about C * 1000 / that many runs a second"
        " whatever the count of workers; more workers only help where the cores are"
        ' (docs/operators.md, "Sizing"). Idle, each worker costs the database its own'
        " heartbeat and DBOS's queue polls (the idle column's growth per worker).",
        END,
    ]
    return "\n".join(lines) + "\n"


def _versus(runs_per_s: float, one_worker: float | None) -> str:
    """A configuration's runs/s as a multiple of one worker's (a dash without that row)."""
    return "—" if one_worker is None else f"{runs_per_s / one_worker:.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hitl.cluster")
    ap.add_argument("--quick", action="store_true", help="2 workers only, a few runs")
    ap.add_argument("--runs", type=int, default=400, help="runs per configuration")
    ap.add_argument("--callers", type=int, default=32, help="closed-loop callers")
    ap.add_argument("--out", default=None, help="write the section into this file")
    args = ap.parse_args(argv)
    counts: tuple[int, ...] = WORKERS
    if args.quick:
        # the gate's proof that the harness runs: one configuration, the one that
        # also starts a second worker (add_worker), not the whole 1-2-4 curve
        counts, args.runs, args.callers = (2,), 16, 8
    if not postgres_available():
        print("bench.hitl.cluster: PostgreSQL is not reachable", file=sys.stderr)
        return 2
    found: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gh-cluster-") as tmp_name:
        tmp = Path(tmp_name)
        for workers in counts:
            (tmp / f"db-{workers}").mkdir()
            url = fresh_database_url("postgres", tmp / f"db-{workers}")
            try:
                print(f"{workers} worker(s), {SHIMS} shims: {args.runs} runs", flush=True)
                found.append(cluster(url, tmp, workers, args.runs, args.callers))
                print(f"  {found[-1]}", flush=True)
            finally:
                drop_database(url)
    text = section(found, args.quick)
    print(text)
    if args.out and not args.quick:
        write_section(Path(args.out), text, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
