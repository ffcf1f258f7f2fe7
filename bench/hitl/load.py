"""Ingest under load and replay speed, for the side-by-side report.

* ``ingest`` — a shim with no worker (so nothing but the intake is measured
  and nothing runs), a load generator in a process of its own posting intents
  on ``clients`` connections for ``seconds``: accepted intents per second,
  latency p50 / p99, the CPU the shim, the generator and PostgreSQL spent per
  intent, and the proof that nothing accepted was lost: every 202 has its run
  row and its DBOS queue entry.
* ``replay_long`` — one run of the longest plan the default profile allows,
  replayed again and again until ``steps`` tool calls have been served: the
  steady rate of a long replay, where per-run reads no longer dominate.
* ``replay`` — every finished run of a Gatehouse database replayed from its
  ledger in this process (no worker, no network): calls served per second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from bench.hitl._proc_stats import postgres_server_cpu_s, tree_cpu_s
from bench.hitl.gatehouse import GatehouseSystem
from ledger import open_database
from shim.cli.client import KEEPALIVE
from tests.support.stack import drop_database, fresh_database_url, postgres_available
from worker.replay import replay_run
from worker.runtime import WorkerSettings

__all__ = ["ingest", "main", "replay_all", "replay_long"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def ingest(
    backend: str, url: str, tmp: Path, clients: int, seconds: float, *, processes: int = 1
) -> dict[str, Any]:
    """Intents posted for ``seconds`` by ``clients`` connections of a load generator in
    a process of its own (``bench.hitl._ingest_client``) to a shim of ``processes``
    processes on one port; the CPU each side spent per accepted intent (the shim's
    processes, the generator, PostgreSQL's backends)."""
    shim = GatehouseSystem(backend, url, tmp, worker=False, shim_processes=processes)
    spec_file, out_file = tmp / f"ingest-{backend}.json", tmp / f"ingest-{backend}.out.json"
    try:
        with httpx.Client(base_url=shim.base, timeout=60, limits=KEEPALIVE) as warm:
            for _ in range(clients):  # connections, imports, the first plans: not measured
                shim.submit(warm, 3)
        address = httpx.URL(shim.base)
        spec = {
            "host": address.host,
            "port": address.port,
            "headers": shim.submitter_headers,
            "body": shim.intent_body(3),
            "clients": clients,
            "seconds": seconds,
        }
        spec_file.write_text(json.dumps(spec))
        pg = backend == "postgres"
        shim_pid = shim.shim_pids()[0]
        shim_cpu, pg_cpu = tree_cpu_s(shim_pid), postgres_server_cpu_s() if pg else 0.0
        subprocess.run(
            [sys.executable, "-m", "bench.hitl._ingest_client", str(spec_file), str(out_file)],
            check=True,
        )
        shim_cpu = tree_cpu_s(shim_pid) - shim_cpu
        pg_cpu = (postgres_server_cpu_s() - pg_cpu) if pg else 0.0
        got: dict[str, Any] = json.loads(out_file.read_text())
    finally:
        shim.close()
    accepted = [str(r) for r in got["accepted"]]
    latencies = [float(x) for x in got["latencies_ms"]]
    elapsed = float(got["elapsed_s"])
    db = open_database(url)
    wf = "dbos.workflow_status" if backend == "postgres" else "workflow_status"
    try:
        with db.engine.connect() as conn:
            have = {str(r[0]) for r in conn.execute(sa.text("SELECT run_id FROM runs")).all()}
            queued = {
                str(r[0])
                for r in conn.execute(
                    sa.text(f"SELECT workflow_uuid FROM {wf} WHERE status = 'ENQUEUED'")
                ).all()
            }
    finally:
        db.dispose()
    per = max(1, len(accepted))
    return {
        "processes": processes,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "accepted": len(accepted),
        "refused": len(got["refused"]),
        "per_s": len(accepted) / elapsed,
        "p50_ms": _pct(latencies, 0.5),
        "p99_ms": _pct(latencies, 0.99),
        "lost": len(set(accepted) - have) + len(set(accepted) - queued),
        "cpu_ms": {
            "shim": 1000 * shim_cpu / per,
            "generator": 1000 * float(got["cpu_s"]) / per,
            "postgres": 1000 * pg_cpu / per,
        },
    }


def replay_all(url: str, tmp: Path) -> dict[str, Any]:
    settings = WorkerSettings.from_env(
        {"GATEHOUSE_DATABASE_URL": url, "GATEHOUSE_WORKSPACE_ROOT": str(tmp / "replay-ws")}
    )
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    sa.text(
                        "SELECT run_id FROM runs WHERE status = 'succeeded' ORDER BY created_at"
                    )
                ).all()
            ]
        per_run: list[float] = []
        calls = mismatched = 0
        began = time.perf_counter()
        for run_id in ids:
            one = time.perf_counter()
            report = replay_run(db, settings, run_id)
            per_run.append((time.perf_counter() - one) * 1000)
            calls += report.calls
            mismatched += 0 if report.match else 1
        elapsed = time.perf_counter() - began
    finally:
        db.dispose()
    return {
        "runs": len(ids),
        "calls": calls,
        "calls_per_s": calls / elapsed if elapsed else 0.0,
        "median_ms_per_run": statistics.median(per_run) if per_run else 0.0,
        "mismatched": mismatched,
    }


def replay_long(url: str, tmp: Path, run_id: str, steps: int) -> dict[str, Any]:
    settings = WorkerSettings.from_env(
        {"GATEHOUSE_DATABASE_URL": url, "GATEHOUSE_WORKSPACE_ROOT": str(tmp / "replay-ws")}
    )
    db = open_database(url)
    try:
        replay_run(db, settings, run_id)  # warm: imports, the first connection
        served = mismatched = runs = 0
        began = time.perf_counter()
        while served < steps:
            report = replay_run(db, settings, run_id)
            served += report.calls
            runs += 1
            mismatched += 0 if report.match else 1
            if report.calls == 0:
                break
        elapsed = time.perf_counter() - began
    finally:
        db.dispose()
    return {
        "steps_per_run": served // max(runs, 1),
        "calls": served,
        "calls_per_s": served / elapsed if elapsed else 0.0,
        "mismatched": mismatched,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.hitl.load``: the ingest alone, on each database, printed (the
    side-by-side report, ``bench:hitl``, runs it too and writes the table)."""
    parser = argparse.ArgumentParser(prog="python -m bench.hitl.load", description=main.__doc__)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--backend", choices=["postgres", "sqlite"], action="append")
    parser.add_argument(
        "--processes",
        default="1,2",
        help="shim processes on the one port, comma-separated: each count measured in turn",
    )
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.processes.split(",") if n]
    backends = args.backend or (["postgres", "sqlite"] if postgres_available() else ["sqlite"])
    with tempfile.TemporaryDirectory(prefix="gh-ingest-") as tmpdir:
        tmp = Path(tmpdir)
        for backend, processes in ((b, n) for b in backends for n in counts):
            sub = tmp / f"{backend}-{processes}"
            sub.mkdir()
            url = fresh_database_url(backend, sub)
            try:
                got = ingest(backend, url, sub, args.clients, args.seconds, processes=processes)
            finally:
                drop_database(url)
            cpu = got["cpu_ms"]
            print(
                f"{backend}, {processes} shim process(es): {got['per_s']:.0f} intents/s"
                f" ({got['accepted']} in {got['seconds']} s,"
                f" {got['refused']} refused, {got['lost']} lost), p50 {got['p50_ms']:.1f} ms,"
                f" p99 {got['p99_ms']:.1f} ms; CPU ms per intent: shim {cpu['shim']:.2f},"
                f" generator {cpu['generator']:.2f}, PostgreSQL {cpu['postgres']:.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
