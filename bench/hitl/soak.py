"""``python -m bench.hitl.soak``: recovery after kill -9, and worker memory over many runs.

* **recovery** — ``--held`` runs wait for approval on one worker; half are approved,
  the worker is killed with SIGKILL at once (some of those are mid-plan), the other
  half approved while no worker runs, and a new worker started under the same
  executor id. Measured: kill → every held run ``succeeded``. Checked: each run has
  exactly its three tool calls in the ledger, each completed once.
* **memory** — ``--runs`` runs through one worker, ``--in-flight`` at a time: the
  worker's resident memory idle after start, after a warm-up, and after the runs
  (printed as it goes).

Both backends, a fresh database each. Results go between this module's markers in
``--out`` (``docs/benchmarks.md``); targets are reported, never an exit code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.hitl._proc_stats import rss_mib
from bench.hitl.gatehouse import GatehouseSystem
from bench.hitl.report import write_section
from ledger import open_database
from tests.support.stack import drop_database, fresh_database_url, postgres_available

__all__ = ["main", "memory", "recovery", "tool_calls_once"]

BEGIN = "<!-- bench:soak begin -->"
END = "<!-- bench:soak end -->"
BACKENDS = ("postgres", "sqlite")


def rows_of_runs(url: str, query: str, run_ids: list[str]) -> list[tuple[Any, ...]]:
    """The rows of ``query`` for ``run_ids`` (``:r`` in it stands for the list)."""
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            stmt = sa.text(query).bindparams(sa.bindparam("r", expanding=True))
            return [tuple(row) for row in conn.execute(stmt, {"r": run_ids})]
    finally:
        db.dispose()


def tool_calls_once(url: str, run_ids: list[str]) -> bool:
    """Each run has exactly 3 tool calls in its ledger, each completed (a call sent
    twice would be a second row: op_key is per run, step and attempt)."""
    found = rows_of_runs(
        url,
        "SELECT run_id, count(*), sum(CASE WHEN status = 'completed' THEN 1 ELSE 0 END)"
        " FROM calls WHERE kind = 'tool' AND run_id IN :r GROUP BY run_id",
        run_ids,
    )
    rows = {str(r[0]): (int(r[1]), int(r[2])) for r in found}
    return len(rows) == len(run_ids) and all(v == (3, 3) for v in rows.values())


def recovery(backend: str, url: str, tmp: Path, held: int) -> dict[str, Any]:
    g = GatehouseSystem(backend, url, tmp / "recovery")
    try:
        g.one_run()  # the worker is up and warm
        ids = [str(g.submit(g.client).json()["run_id"]) for _ in range(held)]
        cards = [g.until(run_id, "waiting_approval")["plan_card"] for run_id in ids]
        digests = [str(card["plan_digest"]) for card in cards]
        half = held // 2
        for run_id, digest in zip(ids[:half], digests[:half], strict=True):
            g.approve(run_id, digest)
        killed = time.monotonic()
        g.kill_worker()
        g.restart_worker()
        for run_id, digest in zip(ids[half:], digests[half:], strict=True):
            g.approve(run_id, digest)
        for run_id in ids:
            g.until(run_id, "succeeded")
        took = time.monotonic() - killed
    finally:
        g.close()
    return {"held": held, "seconds": took, "calls_once": tool_calls_once(url, ids)}


def memory(backend: str, url: str, tmp: Path, runs: int, in_flight: int) -> dict[str, Any]:
    g = GatehouseSystem(backend, url, tmp / "memory")
    try:
        pid = g.pids()[1]
        g.one_run()
        time.sleep(2)
        idle = rss_mib(pid)
        warm_up = min(200, max(in_flight, runs // 50))
        done, rates = 0, []
        with ThreadPoolExecutor(in_flight) as pool:

            def batch(n: int) -> None:
                nonlocal done
                began = time.perf_counter()
                list(pool.map(lambda _: g.one_run(), range(n)))
                rates.append(n / (time.perf_counter() - began))
                done += n

            while done < warm_up:
                batch(in_flight)
            time.sleep(1)
            warm, warm_done, began, shown = rss_mib(pid), done, time.monotonic(), time.monotonic()
            half: float | None = None
            while done < warm_done + runs:
                batch(min(in_flight, warm_done + runs - done))
                if half is None and done - warm_done >= runs / 2:
                    half = rss_mib(pid)
                if time.monotonic() - shown > 30:
                    shown = time.monotonic()
                    print(
                        f"  {backend}: {done - warm_done}/{runs} runs,"
                        f" {(done - warm_done) / (shown - began):.1f} runs/s,"
                        f" worker RSS {rss_mib(pid):.0f} MiB",
                        flush=True,
                    )
        time.sleep(1)
        after = rss_mib(pid)
    finally:
        g.close()
    return {
        "runs": runs,
        "warm_up": warm_up,
        "idle_mib": idle,
        "warm_mib": warm,
        "after_mib": after,
        "growth": (after - warm) / warm,
        "half_mib": half or after,
        "second_half_growth": (after - (half or after)) / (half or after),
        "runs_per_s": statistics.median(rates[len(rates) // 10 :] or rates),
    }


def section(
    recovered: dict[str, dict[str, Any]], mem: dict[str, dict[str, Any]], quick: bool
) -> str:
    lines = [
        BEGIN,
        "## Recovery after kill -9, and worker memory over many runs (issue 13)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:soak` (`bench/hitl/soak.py`); do not edit"
        " by hand." + (" **Quick run: too few runs to judge; no targets.**" if quick else ""),
        "",
        f"* when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; the machine is the one"
        " described in the side-by-side section; shim and worker as separate processes,"
        " driven over HTTP as there",
        "",
        "| backend | runs held | kill -9 → all succeeded, s | each tool call once"
        " | runs | worker RSS idle, MiB | after warm-up (runs) | halfway | after the runs"
        " | growth | over the second half | runs/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b, r in recovered.items():
        m = mem[b]
        lines.append(
            f"| {b} | {r['held']} | {r['seconds']:.1f} | {'yes' if r['calls_once'] else '**no**'}"
            f" | {m['runs']} | {m['idle_mib']:.0f} | {m['warm_mib']:.0f} ({m['warm_up']})"
            f" | {m['half_mib']:.0f} | {m['after_mib']:.0f} | {100 * m['growth']:+.1f} %"
            f" | {100 * m['second_half_growth']:+.1f} % | {m['runs_per_s']:.1f} |"
        )
    if not quick:
        lines += ["", "| target (issue 13) | measured | met |", "|---|---|---|"]
        for b, r in recovered.items():
            m = mem[b]
            ok = r["seconds"] <= 10 and r["calls_once"]
            lines.append(
                f"| recovery after kill -9 ≤ 10 s ({b}) | {r['seconds']:.1f} s"
                f" | {'yes' if ok else '**missed**'} |"
            )
            met = "yes" if m["growth"] <= 0.10 else "**missed**"
            lines.append(
                f"| worker RSS growth over {m['runs']:,} runs ≤ 10 % ({b})"
                f" | {100 * m['growth']:+.1f} % | {met} |"
            )
    lines += [
        "",
        "Recovery is timed from the SIGKILL, so it includes starting a new worker process"
        " (Python, DBOS launch, its recovery of the executor's pending workflows) and the"
        " approvals sent while no worker ran. Growth is taken from after the warm-up, when"
        " imports, pools and caches have been filled, to after the runs; growth over the"
        " second half tells memory that keeps growing from memory that fills up and stops.",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hitl.soak")
    ap.add_argument("--quick", action="store_true", help="a few runs; proves the harness")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--held", type=int, default=16, help="runs the killed worker holds")
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--out", default=None, help="write the section into this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.held, args.in_flight = 20, 4, 4
    if not postgres_available():
        print("bench.hitl.soak: PostgreSQL is not reachable", file=sys.stderr)
        return 2
    recovered: dict[str, dict[str, Any]] = {}
    mem: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for backend in BACKENDS:
            url = fresh_database_url(backend, tmp)
            try:
                print(f"{backend}: recovery after kill -9…", flush=True)
                recovered[backend] = recovery(backend, url, tmp / backend, args.held)
            finally:
                drop_database(url)
            url = fresh_database_url(backend, tmp)
            try:
                print(f"{backend}: {args.runs} runs, worker memory…", flush=True)
                mem[backend] = memory(backend, url, tmp / backend, args.runs, args.in_flight)
            finally:
                drop_database(url)
    text = section(recovered, mem, args.quick)
    print(text)
    if args.out:
        write_section(Path(args.out), text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
