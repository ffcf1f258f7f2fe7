"""Ingest under load and replay speed, for the side-by-side report.

* ``ingest`` — a shim with no worker (so nothing but the intake is measured
  and nothing runs), this process posting intents from ``clients`` threads
  for ``seconds``: accepted intents per second, latency p50 / p99, and the
  proof that nothing accepted was lost: every 202 has its run row and its
  DBOS queue entry.
* ``replay_long`` — one run of the longest plan the default profile allows,
  replayed again and again until ``steps`` tool calls have been served: the
  steady rate of a long replay, where per-run reads no longer dominate.
* ``replay`` — every finished run of a Gatehouse database replayed from its
  ledger in this process (no worker, no network): calls served per second.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from bench.hitl.gatehouse import GatehouseSystem
from ledger import open_database
from shim.cli.client import KEEPALIVE
from worker.replay import replay_run
from worker.runtime import WorkerSettings

__all__ = ["ingest", "replay_all", "replay_long"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def ingest(backend: str, url: str, tmp: Path, clients: int, seconds: float) -> dict[str, Any]:
    shim = GatehouseSystem(backend, url, tmp, worker=False)
    latencies: list[float] = []
    accepted: list[str] = []
    refused: list[int] = []
    lock = threading.Lock()
    try:
        with httpx.Client(base_url=shim.base, timeout=60, limits=KEEPALIVE) as warm:
            shim.submit(warm, 3)  # connections, imports, the first plan: not measured
        deadline = time.monotonic() + seconds

        def client() -> None:
            with httpx.Client(base_url=shim.base, timeout=60, limits=KEEPALIVE) as c:
                while time.monotonic() < deadline:
                    began = time.perf_counter()
                    try:
                        r = shim.submit(c, 3)
                    except RuntimeError:
                        with lock:
                            refused.append(1)
                        continue
                    took = (time.perf_counter() - began) * 1000
                    with lock:
                        latencies.append(took)
                        accepted.append(str(r.json()["run_id"]))

        began = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
    finally:
        shim.close()
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
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "accepted": len(accepted),
        "refused": len(refused),
        "per_s": len(accepted) / elapsed,
        "p50_ms": _pct(latencies, 0.5),
        "p99_ms": _pct(latencies, 0.99),
        "lost": len(set(accepted) - have) + len(set(accepted) - queued),
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
