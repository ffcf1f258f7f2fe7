"""``python -m bench.hitl.waiting``: what plans waiting for people cost a worker.

Issue 28. One shim and one worker (separate processes, shipped defaults, 16
slots), both backends, a fresh database each:

* **idle** — a template run (3 noop steps, submitted, approved, succeeded) timed
  20 times on an idle stack; the worker's resident memory and threads; on
  PostgreSQL, the database transactions per second the idle stack commits.
* **waiting** — ``--waiting`` plans submitted and left at their plan cards (the
  run parks: rows only). Counted: DBOS workflows pending or queued, the worker's
  threads and memory with them; the template run timed again, 20 times, beside them.
* **approve → first step** and **submit → plan card**, p50, from the rows the
  runs wrote.
* **kill -9** — ``--approve`` of the waiting plans approved, the worker killed at
  once (some of them mid-plan) and a new one started: every approved run ends
  ``succeeded`` with each of its tool calls once, and every other plan still waits.
* **behind a backlog** — one submitter's runs (64 of 10 noop steps) approved at
  once, then another submitter's template run: its time, and how many of the
  backlog's runs ended before it; on the worker as shipped (the queue partitioned
  by submitter, each holding at most its share of slots) and again on a worker
  whose share is every slot (first queued, first run).

The template runs timed are another submitter's than the waiting plans' and the
backlog's.

Results go between this module's markers in ``--out`` (``docs/benchmarks.md``);
targets are reported, never an exit code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.hitl._db import one, tx_per_s
from bench.hitl._proc_stats import rss_mib
from bench.hitl.gatehouse import WORKER_CONCURRENCY, GatehouseSystem
from bench.hitl.report import write_section
from bench.hitl.soak import rows_of_runs, tool_calls_once
from bench.hitl.steps import APPROVAL_TO_STEP
from tests.support.stack import drop_database, fresh_database_url, postgres_available
from worker.runtime import default_share

__all__ = ["main", "waiting"]

BEGIN = "<!-- bench:waiting begin -->"
END = "<!-- bench:waiting end -->"
BACKENDS = ("postgres", "sqlite")
TIMED = 20  # template runs timed idle, and again beside the waiting plans
QUICK_TIMED = 5  # --quick: the harness proved, nothing judged
TX_WINDOW_S = 10.0  # how long the transactions per second are counted over (--quick: 2 s)
BACKLOG = (64, 10)  # one submitter's runs approved at once, and each one's noop steps
# DBOS polls for schedules every second for its first minute, then every 30 s: the
# idle count waits that minute out (not with --quick), so it is what an idle stack
# costs from then on.
STARTUP_S = 62.0
SHIPPED_SHARE = default_share(WORKER_CONCURRENCY)


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def _unfinished_workflows(backend: str, url: str) -> int:
    wf = "dbos.workflow_status" if backend == "postgres" else "workflow_status"
    found = one(url, f"SELECT COUNT(*) FROM {wf} WHERE status IN ('PENDING', 'ENQUEUED')")
    return int(found or 0)


def _parked(url: str) -> int:
    return int(one(url, "SELECT COUNT(*) FROM runs WHERE parked_wait IS NOT NULL") or 0)


def _timed(g: GatehouseSystem, n: int) -> tuple[float, list[dict[str, Any]]]:
    """n template runs one after another, from a submitter other than the waiting
    plans' (the target is another submitter's run); p50 ms, and the runs."""
    runs = [g.one_run(who=g.other) for _ in range(n)]
    return statistics.median(r["ms"] for r in runs), runs


def _behind_backlog(g: GatehouseSystem, backlog: int, steps: int) -> dict[str, float]:
    """One submitter's ``backlog`` runs of ``steps`` noop steps approved at once, then
    another submitter's template run: its ms, and how many of the backlog's runs
    ended before it did (all of them: it waited behind the whole backlog)."""
    ended = "SELECT COUNT(*) FROM runs WHERE submitted_by = 'bench-sub' AND status = 'succeeded'"
    before = int(one(g.url, ended) or 0)
    with ThreadPoolExecutor(8) as pool:
        ids = list(
            pool.map(lambda _: str(g.submit(g.client, steps).json()["run_id"]), range(backlog))
        )
        cards = list(pool.map(lambda r: g.until(r, "waiting_approval")["plan_card"], ids))
        list(pool.map(lambda a: g.approve(a[0], a[1]["plan_digest"]), zip(ids, cards, strict=True)))
    theirs = g.one_run(who=g.other)
    ahead = int(one(g.url, ended) or 0) - before
    for run_id in ids:
        g.until(run_id, "succeeded")
    return {"ms": float(theirs["ms"]), "ahead": float(ahead)}


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _until(check: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting until {what}")
        time.sleep(0.5)


def waiting(
    backend: str, url: str, tmp: Path, plans: int, approve: int, *, quick: bool = False
) -> dict[str, Any]:
    timed_n = QUICK_TIMED if quick else TIMED
    window = 2.0 if quick else TX_WINDOW_S
    started = time.monotonic()
    g = GatehouseSystem(backend, url, tmp / "waiting", share=None)
    try:
        pid = g.pids()[1]
        for _ in range(5):
            g.one_run()  # warm
        time.sleep(2)
        idle_rss, idle_threads = rss_mib(pid), _threads(pid)
        if not quick:
            time.sleep(max(0.0, STARTUP_S - (time.monotonic() - started)))
        counted = g.counts()
        idle_tx = tx_per_s(url, window)  # the server's count (PostgreSQL; None on SQLite)
        if idle_tx is None:
            time.sleep(window)
        idle_by_process = _per_s(counted, g.counts(), window)
        idle_ms, idle_runs = _timed(g, timed_n)
        to_card = _to_card(url, [r["run_id"] for r in idle_runs])

        began = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda _: str(g.submit(g.client).json()["run_id"]), range(plans)))
        _until(lambda: _parked(url) >= plans, f"{plans} plans wait", 60 + plans / 5)
        filled_s = time.monotonic() - began
        time.sleep(2)
        held = _unfinished_workflows(backend, url)
        full_rss, full_threads = rss_mib(pid), _threads(pid)
        beside_tx = tx_per_s(url, window)
        beside_ms, timed = _timed(g, timed_n)
        phases = g.phases(timed)
        # kill -9 with the plans waiting and some approved in flight
        chosen = ids[:approve]
        digests = [str(g.until(r, "waiting_approval")["plan_card"]["plan_digest"]) for r in chosen]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda a: g.approve(*a), zip(chosen, digests, strict=True)))
        killed = time.monotonic()
        g.kill_worker()
        g.restart_worker()
        for run_id in chosen:
            g.until(run_id, "succeeded")
        recovered_s = time.monotonic() - killed
        still = _parked(url)
        # one submitter's backlog, and another's run: the shipped share, then a worker
        # whose share is every slot (what the queue did before it was partitioned)
        backlog, steps = (16, 3) if quick else BACKLOG
        fair = _behind_backlog(g, backlog, steps)
        g.kill_worker()
        g.restart_worker(share=WORKER_CONCURRENCY)
        unfair = _behind_backlog(g, backlog, steps)
    finally:
        g.close()
    return {
        "plans": plans,
        "filled_s": filled_s,
        "idle_ms": idle_ms,
        "beside_ms": beside_ms,
        "idle_rss": idle_rss,
        "full_rss": full_rss,
        "idle_threads": idle_threads,
        "full_threads": full_threads,
        "held_workflows": held,
        "idle_tx": idle_tx,
        "idle_by_process": idle_by_process,
        "beside_tx": beside_tx,
        "approve_to_step": _p50(phases.get(APPROVAL_TO_STEP, [])),
        "submit_to_card": _p50(to_card),
        "approved": approve,
        "recovered_s": recovered_s,
        "calls_once": tool_calls_once(url, chosen),
        "still_waiting": still,
        "backlog": backlog,
        "backlog_steps": steps,
        "fair": fair,
        "unfair": unfair,
    }


def _to_card(url: str, run_ids: list[str]) -> list[float]:
    """Submit → plan card, ms, of runs submitted one at a time (from their rows)."""
    rows = rows_of_runs(
        url,
        "SELECT r.created_at, c.created_at FROM runs r JOIN plan_cards c"
        " USING (run_id) WHERE r.run_id IN :r",
        run_ids,
    )
    return [_ms(str(card)) - _ms(str(submitted)) for submitted, card in rows]


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def _per_s(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], seconds: float
) -> dict[str, float]:
    """Each process's transactions per second between two readings of its counts
    (commits and rollbacks on every SQLAlchemy engine in it, DBOS's included)."""

    def ended(c: dict[str, int]) -> int:
        return c["commits"] + c["rollbacks"]

    return {p: (ended(after[p]) - ended(before[p])) / seconds for p in ("worker", "shim")}


def _tx(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def section(found: dict[str, dict[str, Any]], quick: bool) -> str:
    lines = [
        BEGIN,
        "## Plans waiting for people (issue 28)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:waiting` (`bench/hitl/waiting.py`); do not"
        " edit by hand." + (" **Quick run: too few plans to judge; no targets.**" if quick else ""),
        "",
        f"* when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; one shim and one worker"
        " (16 slots) as separate processes, driven over HTTP; a template run is 3 noop steps,"
        " submitted, approved when its card appears, until `succeeded`",
        "",
        "| backend | plans waiting | workflows pending or queued for them | worker threads idle"
        " → with them | worker RSS idle → with them, MiB | template run idle, ms p50"
        " | beside the waiting plans | approve → first step, ms p50 | submit → plan card, ms p50"
        " | db transactions/s idle → with them |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b, r in found.items():
        lines.append(
            f"| {b} | {r['plans']:,} | {r['held_workflows']} | {r['idle_threads']} →"
            f" {r['full_threads']} | {r['idle_rss']:.0f} → {r['full_rss']:.0f}"
            f" ({100 * (r['full_rss'] / r['idle_rss'] - 1):+.1f} %) | {r['idle_ms']:.0f}"
            f" | {r['beside_ms']:.0f} ({r['beside_ms'] / r['idle_ms']:.2f}x)"
            f" | {r['approve_to_step']:.1f} | {r['submit_to_card']:.0f}"
            f" | {_tx(r['idle_tx'])} → {_tx(r['beside_tx'])} |"
        )
    lines += [
        "",
        "| backend | approved, then kill -9 of the worker | kill → all succeeded, s"
        " | each tool call once | plans still waiting after |",
        "|---|---|---|---|---|",
    ]
    for b, r in found.items():
        lines.append(
            f"| {b} | {r['approved']} | {r['recovered_s']:.1f}"
            f" | {'yes' if r['calls_once'] else '**no**'} | {r['still_waiting']:,}"
            f" of {r['plans'] - r['approved']:,} |"
        )
    lines += [
        "",
        "| backend | one submitter's backlog, approved at once | share of a worker's"
        f" {WORKER_CONCURRENCY} slots | another submitter's template run, ms | vs idle"
        " | backlog runs ended before it |",
        "|---|---|---|---|---|---|",
    ]
    for b, r in found.items():
        for name, share in (("fair", SHIPPED_SHARE), ("unfair", WORKER_CONCURRENCY)):
            m = r[name]
            lines.append(
                f"| {b} | {r['backlog']} runs of {r['backlog_steps']} noop steps | {share}"
                f"{' (shipped)' if share == SHIPPED_SHARE else ' (every slot)'}"
                f" | {m['ms']:.0f} | {m['ms'] / r['idle_ms']:.1f}x"
                f" | {m['ahead']:.0f} of {r['backlog']} |"
            )
    if not quick:
        lines += ["", "| target (issue 28) | measured | met |", "|---|---|---|"]
        for b, r in found.items():
            rows = [
                (
                    f"{r['plans']:,} waiting plans hold 0 workflows ({b})",
                    str(r["held_workflows"]),
                    r["held_workflows"] == 0,
                ),
                (
                    f"a template run beside them ≤ 1.5x idle ({b})",
                    f"{r['beside_ms'] / r['idle_ms']:.2f}x",
                    r["beside_ms"] <= 1.5 * r["idle_ms"],
                ),
                (
                    f"worker RSS with them ≤ +10 % of idle ({b})",
                    f"{100 * (r['full_rss'] / r['idle_rss'] - 1):+.1f} %",
                    r["full_rss"] <= 1.1 * r["idle_rss"],
                ),
                (
                    f"approve → first step p50 ≤ {5 if b == 'postgres' else 20} ms ({b})",
                    f"{r['approve_to_step']:.1f} ms",
                    r["approve_to_step"] <= (5 if b == "postgres" else 20),
                ),
                (
                    f"kill -9, {r['approved']} approved: all once, none waiting lost ({b})",
                    "yes"
                    if r["calls_once"] and r["still_waiting"] == r["plans"] - r["approved"]
                    else "no",
                    r["calls_once"] and r["still_waiting"] == r["plans"] - r["approved"],
                ),
            ]
            if b == "postgres":
                rows.append(
                    (
                        "submit → plan card p50 ≤ 20 ms (postgres)",
                        f"{r['submit_to_card']:.0f} ms",
                        r["submit_to_card"] <= 20,
                    )
                )
            per = r["idle_by_process"]
            server = "" if r["idle_tx"] is None else f" (the server's count: {r['idle_tx']:.1f})"
            rows.append(
                (
                    f"idle stack ≤ 2 database transactions/s per process ({b})",
                    f"worker {per['worker']:.1f}, shim {per['shim']:.1f}" + server,
                    max(per.values()) <= 2,
                )
            )
            for name, measured, met in rows:
                lines.append(f"| {name} | {measured} | {'yes' if met else '**missed**'} |")
    lines += [
        "",
        "A plan waiting for a decision is rows only: the stretch that put it on its card"
        " parked the run and ended, so it holds no queue slot, thread or connection. What"
        " a waiting plan still costs is its rows, and the reaper's expiry sweep reading the"
        " index of parked runs once a heartbeat. Approve → first step is the decision's"
        " hand-off: the next stretch is a DBOS queue entry written with the decision, claimed"
        " when the worker hears of it (PostgreSQL `LISTEN`; SQLite: a datagram within the host)"
        " and started at the decision from the continuation the park wrote (the decision"
        " itself taken in the approval's transaction). Submit → plan card is a run submitted"
        " alone on the idle"
        " stack (pick-up, compile, gate, the card). Worker threads are alive, not held: DBOS's"
        " pool keeps the threads a burst of stretches started. The template runs timed idle"
        " and beside the plans are another submitter's than the plans'. Behind a backlog:"
        " one submitter's runs approved at once, then another submitter's run, on the"
        f" worker as shipped (`GATEHOUSE_WORKER_SHARE` {SHIPPED_SHARE}: the queue is"
        " partitioned by submitter) and on one restarted with a share of every slot"
        " (`GATEHOUSE_WORKER_SHARE` 16, the queue as it was before: first queued, first"
        " run); the last column counts the backlog's runs that ended first. The idle stack's"
        " transactions are counted from its second minute on (DBOS looks for new schedules"
        " every second in its first minute, then every 30 s).",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hitl.waiting")
    ap.add_argument("--quick", action="store_true", help="a few plans; proves the harness")
    ap.add_argument("--waiting", type=int, default=10_000, help="plans left waiting")
    ap.add_argument("--approve", type=int, default=100, help="of them approved, then kill -9")
    ap.add_argument("--out", default=None, help="write the section into this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.waiting, args.approve = 40, 8
    if not postgres_available():
        print("bench.hitl.waiting: PostgreSQL is not reachable", file=sys.stderr)
        return 2
    found: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gh-waiting-") as tmp_name:
        tmp = Path(tmp_name)
        for backend in BACKENDS:
            url = fresh_database_url(backend, tmp / backend)
            try:
                print(f"{backend}: {args.waiting:,} plans left waiting", flush=True)
                found[backend] = waiting(
                    backend, url, tmp / backend, args.waiting, args.approve, quick=args.quick
                )
                print(f"  {found[backend]}", flush=True)
            finally:
                drop_database(url)
    text = section(found, args.quick)
    print(text)
    if args.out and not args.quick:
        write_section(Path(args.out), text, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
