"""``python -m bench.hitl [--quick] [--out FILE]``: Gatehouse, LangGraph, bare DBOS side by side.

One command run; every system is started once and stays up. Each round runs
``--per-round`` sequential runs of every system, then one batch of
``--in-flight`` runs at once of every system; the order rotates per round so
no system always goes first. Then a counting pass per Gatehouse backend: SQL
statements and transactions per run and, from a 3-step run minus a 1-step run,
per tool call, with the idle background (heartbeats, queue polls) measured
and taken off. Exit 2 only when the harness cannot run; missed targets are
reported, never an exit code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.hitl._peer import Peer
from bench.hitl._proc_stats import cpu_s, postgres_cpu_s
from bench.hitl.gatehouse import GatehouseSystem
from bench.hitl.load import ingest, replay_all, replay_long
from bench.hitl.report import Results, section, write_section
from bench.hitl.steps import DBOS_STEP, call_times, insert_floor_ms, step_times
from policies import catalog
from tests.support.stack import drop_database, fresh_database_url, postgres_available

__all__ = ["main"]

# Bare DBOS with a queued workflow per stretch, as Gatehouse splits a run at its decision
# (``peer_dbos`` ``handoff``): timed in the phases pass only.
HANDOFF = "dbos-handoff/postgres"
SYSTEMS = [
    "gatehouse/postgres",
    "gatehouse/sqlite",
    "langgraph/postgres",
    "langgraph-sync/postgres",
    "dbos/postgres",
]


def _total(g: GatehouseSystem) -> dict[str, dict[str, int]]:
    time.sleep(0.25)  # the counters are written every 50 ms and the last run's tail settles
    return g.counts()


def _delta(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {p: {k: b[p][k] - a[p][k] for k in a[p]} for p in a}


def count_pass(g: GatehouseSystem, runs: int, idle_s: float) -> dict[str, Any]:
    """Per run (3 steps) and per tool call, per process, background taken off."""
    start = _total(g)
    time.sleep(idle_s)
    idle = _delta(start, _total(g))
    rate = {p: {k: v / (idle_s + 0.25) for k, v in c.items()} for p, c in idle.items()}
    net: dict[int, dict[str, dict[str, float]]] = {}
    for steps in (3, 1):
        before, began = _total(g), time.monotonic()
        for _ in range(runs):
            g.one_run(steps)
        after, took = _total(g), time.monotonic() - began + 0.25
        d = _delta(before, after)
        net[steps] = {p: {k: (d[p][k] - rate[p][k] * took) / runs for k in d[p]} for p in d}
    per_call = {p: {k: (net[3][p][k] - net[1][p][k]) / 2 for k in net[3][p]} for p in net[3]}
    return {"per_run": net[3], "per_tool_call": per_call, "idle_per_s": rate, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hitl")
    ap.add_argument("--quick", action="store_true", help="a couple of runs each; no targets")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--per-round", type=int, default=5, help="sequential runs per system per round")
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--count-runs", type=int, default=10)
    ap.add_argument("--out", default=None, help="write the section into this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.per_round, args.in_flight, args.count_runs = 1, 2, 4, 2
    if not postgres_available():
        print("bench.hitl: PostgreSQL is not reachable; the comparison needs it", file=sys.stderr)
        return 2
    began = time.monotonic()
    seq: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    flight: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    gh_runs: dict[str, list[dict[str, Any]]] = {"postgres": [], "sqlite": []}
    urls: list[str] = []
    cpu: dict[str, dict[str, float]] = {}
    closers: list[Callable[[], None]] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        try:

            def url(backend: str) -> str:
                urls.append(fresh_database_url(backend, tmp))
                return urls[-1]

            gh = {b: GatehouseSystem(b, url(b), tmp) for b in ("postgres", "sqlite")}
            closers += [g.close for g in gh.values()]
            lg = Peer("bench.hitl.peer_langgraph", url("postgres"), tmp / "langgraph.log")
            closers.append(lg.close)
            dbos = Peer("bench.hitl.peer_dbos", url("postgres"), tmp / "dbos.log")
            closers.append(dbos.close)
            peers = {
                "langgraph/postgres": (lg, "async"),
                "langgraph-sync/postgres": (lg, "sync"),
                "dbos/postgres": (dbos, ""),
            }

            def run_seq(name: str, n: int) -> list[float]:
                if name.startswith("gatehouse/"):
                    runs = [gh[name.split("/")[1]].one_run() for _ in range(n)]
                    gh_runs[name.split("/")[1]].extend(runs)
                    return [r["ms"] for r in runs]
                peer, variant = peers[name]
                return [float(x) for x in peer.ask(op="seq", n=n, variant=variant)["ms"]]

            def run_flight(name: str, n: int) -> float:
                if name.startswith("gatehouse/"):
                    return gh[name.split("/")[1]].in_flight(n)
                peer, variant = peers[name]
                return float(peer.ask(op="flight", n=n, variant=variant)["runs_per_s"])

            def database(name: str) -> str:
                """The system's own database (SQLite Gatehouse: none on the server)."""
                if name.startswith("gatehouse/"):
                    return str(sa.engine.make_url(gh[name.split("/")[1]].url).database)
                return str(sa.engine.make_url(peers[name][0].url).database)

            def pids(name: str) -> list[int]:
                if name.startswith("gatehouse/"):
                    return gh[name.split("/")[1]].pids()
                return [peers[name][0].proc.pid]

            def charged(name: str, runs: int, work: Callable[[], Any]) -> Any:
                """``work`` with the CPU it cost charged to ``name``: its own processes, this
                process (Gatehouse's HTTP clients; a peer's caller only waits on a pipe) and
                the PostgreSQL backends serving its database."""
                db = database(name)
                before = (sum(map(cpu_s, pids(name))), time.process_time(), postgres_cpu_s(db))
                out = work()
                after = (sum(map(cpu_s, pids(name))), time.process_time(), postgres_cpu_s(db))
                got = cpu.setdefault(name, {"system": 0.0, "client": 0.0, "postgres": 0.0})
                for key, a, b in zip(("system", "client", "postgres"), before, after, strict=True):
                    got[key] += b - a
                got["runs"] = got.get("runs", 0.0) + runs
                return out

            for name in SYSTEMS:  # warm-up: connections, imports, first plans; not measured
                run_seq(name, 1)
            gh_runs = {"postgres": [], "sqlite": []}
            for r in range(args.rounds):
                order = SYSTEMS[r % len(SYSTEMS) :] + SYSTEMS[: r % len(SYSTEMS)]
                for name in order:
                    seq[name] += charged(
                        name, args.per_round, partial(run_seq, name, args.per_round)
                    )
                for name in order:
                    flight[name].append(
                        charged(name, args.in_flight, partial(run_flight, name, args.in_flight))
                    )
                print(
                    f"round {r + 1}/{args.rounds}: "
                    + ", ".join(f"{n} {statistics.median(seq[n]):.0f} ms" for n in SYSTEMS),
                    flush=True,
                )
            counts = {
                b: count_pass(g, args.count_runs, 1.0 if args.quick else 3.0) for b, g in gh.items()
            }
            before = dbos.ask(op="counts")["counts"]
            dbos.ask(op="seq", n=args.count_runs)
            after = dbos.ask(op="counts")["counts"]
            dbos_per_run = {k: (after[k] - before[k]) / args.count_runs for k in after}
            phases = {f"gatehouse/{b}": g.phases(gh_runs[b]) for b, g in gh.items()}
            since = time.time() * 1000  # a sequential pass, its steps timed by DBOS's records
            for _ in range(args.count_runs):
                gh["postgres"].one_run()
            dbos.ask(op="seq", n=args.count_runs)
            for name, (peer, variant) in peers.items():  # timed by the peers, same pass
                if peer is not dbos:
                    peer.ask(op="seq", n=args.count_runs, variant=variant)
                phases[name] = peer.ask(op="phases", since=since, variant=variant)["phases"]
            # The floor of Gatehouse's hand-off at a decision: bare DBOS queueing the next
            # stretch (its own process, started now: its fast queue poll costs nothing above)
            handoff = Peer("bench.hitl.peer_dbos", url("postgres"), tmp / "handoff.log", "handoff")
            closers.append(handoff.close)
            handoff.ask(op="seq", n=1)  # warm-up
            warm = time.time() * 1000
            handoff.ask(op="seq", n=args.count_runs)
            phases[HANDOFF] = handoff.ask(op="phases", since=warm)["phases"]
            per_step = {
                "gatehouse/postgres": call_times(gh["postgres"].url, since),
                "dbos/postgres": step_times(dbos.url, DBOS_STEP, since),
            }
            floor_ms = insert_floor_ms(gh["postgres"].url)
            retried = {b: dict(g.retried) for b, g in gh.items()}
            replay = {b: replay_all(g.url, tmp) for b, g in gh.items()}
            longest = catalog.profile("default").model.max_steps
            total = 200 if args.quick else 10_000
            replay_steps = {
                b: replay_long(g.url, tmp, g.one_run(longest)["run_id"], total)
                for b, g in gh.items()
            }
            for g in gh.values():  # the ingest stacks get the machine to themselves
                g.close()
            clients, seconds = (4, 1.5) if args.quick else (16, 10.0)
            ingested = {b: ingest(b, url(b), tmp, clients, seconds) for b in gh}
        finally:
            for close in reversed(closers):
                close()
            for u in urls:
                drop_database(u)
    results = Results(
        quick=args.quick,
        rounds=args.rounds,
        per_round=args.per_round,
        in_flight=args.in_flight,
        seq=seq,
        flight=flight,
        counts=counts,
        dbos_per_run=dbos_per_run,
        phases=phases,
        retried=retried,
        seconds=time.monotonic() - began,
        ingest=ingested,
        replay=replay,
        cpu=cpu,
        replay_long=replay_steps,
        per_step=per_step,
        floor_ms=floor_ms,
    )
    text = section(results)
    print(text)
    if args.out:
        write_section(Path(args.out), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
