"""Gatehouse benchmarks; ``mise run bench`` writes the results to docs/benchmarks.md.

Two measurements, on SQLite and on PostgreSQL:

* ledger write path: one call's claim + completion (two commits) through
  ``ledger.calls``, without DBOS, ``--calls`` times;
* a whole run: submit a one-step ``run-plan`` intent with its approval sent at
  once, until the run is ``succeeded`` (shim + worker in this process, queue
  and wake-ups through the database), ``--runs`` times.

and, with no database, the OpenCode executor: a real ``opencode serve`` (the
pinned build) driven by the scripted model — the server's cold start, one
build turn that edits a file through a permission ask (``--turns`` times), and
how far past ``stall_s`` the stall detector fires.

Targets live here, never in tests: a run whose numbers miss a target is
reported, and the command exits 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from bench.hitl.report import BEGIN as HITL_BEGIN
from bench.hitl.report import END as HITL_END
from contracts import JsonObject, OpencodePolicy, Plan, digest_of
from ledger import calls, migrate, open_database
from tests.support.stack import (
    drop_database,
    fresh_database_url,
    postgres_available,
    shim_client,
)
from worker.app import launch, shutdown
from worker.handlers.opencode.runner import server_of, turn_spec
from worker.handlers.opencode.supervisor import stop_running_server
from worker.handlers.opencode.turn import run_turn
from worker.replay import replay_run
from worker.runtime import WorkerSettings, runtime
from worker.scripted_model import ScriptedModel, load_script

# Targets on the reference machine (2 cores, local PostgreSQL 15).
TARGETS = {
    ("ledger", "sqlite"): 20.0,  # ms per call, p95
    ("ledger", "postgres"): 20.0,
    ("run", "sqlite"): 5000.0,  # ms submit → succeeded, p95 (SQLite wake-ups poll)
    ("run", "postgres"): 2000.0,
    ("replay", "sqlite"): 100.0,  # ms to replay one finished run from its ledger, p95
    ("replay", "postgres"): 100.0,
    ("oc_start", "none"): 20000.0,  # ms for a supervised opencode serve to be ready
    ("oc_turn", "none"): 5000.0,  # ms for one build turn with one edit and its ask, p95
    ("oc_stall", "none"): 1000.0,  # ms the stall detector fires after stall_s, p95
}


def bench_opencode(tmp: Path, turns: int) -> dict[str, list[float]]:
    write: JsonObject = {"name": "write", "arguments": {"filePath": "f.txt", "content": "x"}}
    script = load_script(
        {
            "turns": [
                {"match": "EDIT", "replies": [{"tool_calls": [write]}, {"content": "ok"}]},
                {"match": "STALL", "replies": [{"content": "hm", "stall": True}]},
            ]
        }
    )
    out: dict[str, list[float]] = {"oc_start": [], "oc_turn": [], "oc_stall": []}
    policy = OpencodePolicy(stall_s=2)
    with ScriptedModel(script) as model:
        settings = WorkerSettings.from_env(
            {
                "GATEHOUSE_WORKSPACE_ROOT": str(tmp / "oc-ws"),
                "GATEHOUSE_OPENCODE_STATE": str(tmp / "oc-state"),
                "GATEHOUSE_OPENCODE_MODEL_URL": model.base_url,
                "GATEHOUSE_OPENCODE_MODEL": "scripted",
                "GATEHOUSE_EXECUTOR_ID": "bench",
            }
        )
        started = time.perf_counter()
        server = server_of(settings)
        out["oc_start"].append((time.perf_counter() - started) * 1000)
        try:
            for n in range(turns + 3):
                prompt = "STALL" if n >= turns else "EDIT"
                spec = turn_spec(
                    settings,
                    run_id=f"bench-{n}",
                    step_id="s",
                    op_key=uuid.uuid4().hex * 2,
                    agent="build",
                    prompt=prompt,
                    schema=None,
                    policy=policy,
                    timeout_s=60,
                    max_output_bytes=65536,
                )
                began = time.perf_counter()
                result = run_turn(server, spec)
                took = (time.perf_counter() - began) * 1000
                if prompt == "EDIT":
                    if not result.ok:
                        raise RuntimeError(f"bench turn failed: {result.error_message}")
                    out["oc_turn"].append(took)
                else:
                    idle = result.output["diagnostics"]
                    assert isinstance(idle, dict)
                    out["oc_stall"].append((float(str(idle["idle_s"])) - policy.stall_s) * 1000)
        finally:
            stop_running_server()
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_ledger(url: str, n: int) -> list[float]:
    db = open_database(url)
    migrate(db)
    run_id = "bench_" + uuid.uuid4().hex
    out = []
    for i in range(n):
        key = calls.op_key(run_id, f"s{i}", 1)
        started = time.perf_counter()
        with db.engine.begin() as conn:
            calls.claim(
                conn,
                key=key,
                run_id=run_id,
                step_id=f"s{i}",
                attempt=1,
                kind="tool",
                target="noop",
                request={"i": i},
            )
        with db.engine.begin() as conn:
            calls.complete(
                conn,
                key=key,
                run_id=run_id,
                response={"ok": True, "i": i},
                ok=True,
                error_code=None,
                duration_ms=0,
            )
        out.append((time.perf_counter() - started) * 1000)
    with db.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM calls WHERE run_id = :r"), {"r": run_id})
    db.dispose()
    return out


def bench_runs(url: str, n: int, tmp: Path) -> tuple[list[float], list[float]]:
    """Submit → succeeded for n one-step runs, then the replay of each from its ledger."""

    launch(
        WorkerSettings.from_env(
            {
                "GATEHOUSE_DATABASE_URL": url,
                "GATEHOUSE_EXECUTOR_ID": "bench",
                "GATEHOUSE_WORKSPACE_ROOT": str(tmp / "ws"),
            }
        )
    )
    plan = {
        "objective": "bench",
        "steps": [
            {
                "step_id": "note",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input": {"n": 1},
            }
        ],
    }
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    out: list[float] = []
    replays: list[float] = []
    run_ids: list[str] = []
    try:
        with shim_client(url) as client:
            for _ in range(n):
                started = time.perf_counter()
                r = client.post(
                    "/intent",
                    json={"recipe": "echo", "objective": "bench", "mode": "run-plan", "plan": plan},
                )
                run_id = r.json()["run_id"]
                client.post(f"/approve/{run_id}", json={"plan_digest": digest})
                while client.get(f"/runs/{run_id}").json()["status"] != "succeeded":
                    time.sleep(0.005)
                out.append((time.perf_counter() - started) * 1000)
                run_ids.append(run_id)
        db = open_database(url)
        try:
            for run_id in run_ids:
                started = time.perf_counter()
                report = replay_run(db, runtime().settings, run_id)
                replays.append((time.perf_counter() - started) * 1000)
                if not report.match:
                    raise RuntimeError(f"replay of {run_id} diverged: {report.divergences}")
        finally:
            db.dispose()
    finally:
        shutdown()
    return out, replays


Row = tuple[str, str, int, float, float, float]


def _collect(
    measured: dict[str, list[float]], backend: str, rows: list[Row], missed: list[str]
) -> None:
    for what_name, values in measured.items():
        p50, p95 = statistics.median(values), _pct(values, 0.95)
        target = TARGETS[(what_name, backend)]
        rows.append((what_name, backend, len(values), p50, p95, target))
        if p95 > target:
            missed.append(f"{what_name}/{backend}: p95 {p95:.1f} ms > {target} ms")
        print(
            f"{what_name:<8} {backend:<9} n={len(values):<4} p50 {p50:8.2f} ms  p95 {p95:8.2f} ms",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--turns", type=int, default=10)
    args = ap.parse_args()
    backends = ["sqlite"] + (["postgres"] if postgres_available() else [])
    rows: list[Row] = []
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for backend in backends:
            for name, count in (("ledger", args.calls), ("run", args.runs)):
                url = fresh_database_url(backend, tmp)
                try:
                    if name == "ledger":
                        measured = {"ledger": bench_ledger(url, count)}
                    else:
                        ran, replayed = bench_runs(url, count, tmp)
                        measured = {"run": ran, "replay": replayed}
                finally:
                    drop_database(url)
                _collect(measured, backend, rows, missed)
        _collect(bench_opencode(tmp, args.turns), "none", rows, missed)
    lines = [
        "# Benchmarks",
        "",
        "Written by `npx -y @jdxcode/mise run bench` (`bench/run.py`); do not edit by hand.",
        "",
        f"* when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"* machine: {os.cpu_count()} cores, Python {platform.python_version()},"
        f" {platform.system()}",
        f"* backends: {', '.join(backends)}"
        + ("" if "postgres" in backends else " (PostgreSQL was not reachable)"),
        "",
        "| measurement | backend | n | p50 (ms) | p95 (ms) | target p95 (ms) | met |",
        "|---|---|---|---|---|---|---|",
    ]
    what = {
        "ledger": "ledger claim + completion, one call",
        "run": "one-step run, submit → succeeded",
        "replay": "replay of a finished one-step run from its ledger",
        "oc_start": "OpenCode server cold start (supervised, until ready)",
        "oc_turn": "OpenCode build turn: one edit, its permission ask, the reply",
        "oc_stall": "stall detector: time past stall_s until it fires",
    }
    for name, backend, count, p50, p95, target in rows:
        lines.append(
            f"| {what[name]} | {backend} | {count} | {p50:.2f} | {p95:.2f} | {target:.0f} |"
            f" {'yes' if p95 <= target else '**no**'} |"
        )
    lines += [
        "",
        "What the numbers mean:",
        "",
        "* The ledger row is the cost Gatehouse adds to every provider or tool call on top of",
        "  the call itself: two commits (the `started` claim and the completion). In a run the",
        "  claim also checks the step's boundary for a cancel and the completion also writes",
        "  the step's record; DBOS's look-up of the step and its checkpoint make four.",
        "* The run figure includes the HTTP round trips of submit and approve, the queue hand-off",
        "  to the worker (polled every 0.05 s), the approval wake-up, the workflow's database",
        "  steps and the polling of this client. On SQLite a waiting workflow learns of its",
        "  approval by polling (every 0.05 s, `GATEHOUSE_WAKE_POLL_S`); PostgreSQL wakes it",
        "  with LISTEN/NOTIFY.",
        "* The replay figure is `worker.replay.replay_run` in-process: the run's lineage and",
        "  intent are read, the flow re-runs with every call served from the ledger by op_key,",
        "  and the trace digest is compared; no outbound call, no write. Through the API",
        "  (`POST /runs/{id}/replay`) add a queue hand-off to a worker (up to one poll).",
        "* The OpenCode rows need no database: the pinned `opencode serve` under the worker's",
        "  supervisor, driven by the scripted model on loopback (so the model answers at once",
        "  and the figures are OpenCode's and Gatehouse's own overhead). A turn includes the",
        "  workspace snapshots before and after, the event stream, the permission answer and",
        "  the reply. Each measured turn is the first of a new run, in a new directory, so it",
        "  includes OpenCode loading that directory as a project (most of the figure). The",
        "  stall row is how long after `stall_s` of silence the detector fired",
        "  (it looks every 0.2 s).",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # The side-by-side section is bench/hitl's (mise run bench:hitl), and what follows it
    # is written by hand: keep both.
    kept = out.read_text(encoding="utf-8") if out.exists() else ""
    if HITL_BEGIN in kept and HITL_END in kept:
        lines += [HITL_BEGIN + kept.split(HITL_BEGIN, 1)[1].rstrip("\n"), ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    for m in missed:
        print(f"target missed: {m}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
