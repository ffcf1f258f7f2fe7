"""The HITL section of docs/benchmarks.md: medians, ratios within the run, targets.

``write_section`` replaces the text between the markers (or appends it), so
``bench/run.py``, which rewrites the rest of the file, and this keep each other's part.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.hitl.gatehouse import WORKER_CONCURRENCY
from bench.hitl.steps import APPROVAL_TO_STEP, SUBMIT_TO_CARD
from tests.support.stack import pg_admin_url

__all__ = ["BEGIN", "END", "Results", "section", "write_section"]

BEGIN = "<!-- bench:hitl begin -->"
END = "<!-- bench:hitl end -->"


@dataclass
class Results:
    quick: bool
    rounds: int
    per_round: int
    in_flight: int
    seq: dict[str, list[float]]
    flight: dict[str, list[float]]
    counts: dict[str, dict[str, Any]]
    dbos_per_run: dict[str, float]
    phases: dict[str, dict[str, list[float]]]
    retried: dict[str, dict[str, int]]
    seconds: float
    ingest: dict[str, dict[str, Any]]  # per backend: see bench.hitl.load.ingest
    replay: dict[str, dict[str, Any]]  # per backend: see bench.hitl.load.replay_all
    cpu: dict[str, dict[str, float]]  # per system: CPU seconds (system, client, postgres), runs
    replay_long: dict[str, dict[str, Any]]  # per backend: see bench.hitl.load.replay_long
    per_step: dict[str, dict[str, Any]]  # per system: see bench.hitl.steps.step_times
    floor_ms: float  # one INSERT in autocommit, PostgreSQL


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _pg_version() -> str:
    engine = sa.create_engine(pg_admin_url().replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return str(conn.execute(sa.text("SHOW server_version")).scalar())
    finally:
        engine.dispose()


def _tx(c: dict[str, float], prefix: str = "") -> float:
    return c[f"{prefix}commits"] + c[f"{prefix}rollbacks"]


def section(r: Results) -> str:
    med = {n: statistics.median(v) for n, v in r.seq.items()}
    rps = {n: statistics.median(v) for n, v in r.flight.items()}
    gh, lg, lgs, db = (
        "gatehouse/postgres",
        "langgraph/postgres",
        "langgraph-sync/postgres",
        "dbos/postgres",
    )
    worker_call = r.counts["postgres"]["per_tool_call"]["worker"]
    lines = [
        BEGIN,
        "## Human in the loop, side by side (issue 13)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:hitl` (`bench/hitl/`); do not edit by hand."
        + (" **Quick run: too few runs to judge; no targets.**" if r.quick else ""),
        "",
        f"* when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {r.seconds:.0f} s",
        f"* machine: {os.cpu_count()} cores, Python {platform.python_version()},"
        f" {platform.system()}, PostgreSQL {_pg_version()} (local, one server, a database each)",
        f"* versions: dbos {version('dbos')}, langgraph {version('langgraph')},"
        f" langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}",
        f"* {r.rounds} interleaved rounds; per round and system {r.per_round} sequential runs,"
        f" then {r.in_flight} runs in flight at once",
        "",
        "| system | sequential n | median ms/run | p90 ms/run"
        f" | {r.in_flight} in flight, median runs/s |",
        "|---|---|---|---|---|",
    ]
    for n, values in r.seq.items():
        lines.append(f"| {n} | {len(values)} | {med[n]:.1f} | {_p90(values):.1f} | {rps[n]:.2f} |")
    lines += [
        "",
        "Ratios, within this run:",
        "",
        f"* sequential, Gatehouse ÷ LangGraph: {med[gh] / med[lg]:.1f}x"
        f" (÷ LangGraph durability=sync: {med[gh] / med[lgs]:.1f}x);"
        f" Gatehouse ÷ bare DBOS: {med[gh] / med[db]:.1f}x",
        f"* {r.in_flight} in flight, Gatehouse ÷ LangGraph: {rps[gh] / rps[lg]:.2f}x"
        f" (÷ sync: {rps[gh] / rps[lgs]:.2f}x); Gatehouse ÷ bare DBOS: {rps[gh] / rps[db]:.2f}x",
        "",
    ]
    if not r.quick:
        targets = [
            (
                "sequential ≤ 3x LangGraph ms/run (PostgreSQL)",
                med[gh] <= 3 * med[lg],
                f"{med[gh] / med[lg]:.1f}x",
            ),
            (
                "sequential ≤ 100 ms/run on SQLite",
                med["gatehouse/sqlite"] <= 100,
                f"{med['gatehouse/sqlite']:.0f} ms",
            ),
            (
                f"{r.in_flight} in flight ≥ 0.5x LangGraph runs/s",
                rps[gh] >= 0.5 * rps[lg],
                f"{rps[gh] / rps[lg]:.2f}x",
            ),
            (
                f"{r.in_flight} in flight ≥ bare DBOS runs/s",
                rps[gh] >= rps[db],
                f"{rps[gh] / rps[db]:.2f}x",
            ),
            (
                "per tool call ≤ 1.5x a bare DBOS step (start → next start, PostgreSQL)",
                r.per_step[gh]["flow_ms"] <= 1.5 * r.per_step[db]["flow_ms"],
                f"{r.per_step[gh]['flow_ms'] / max(r.per_step[db]['flow_ms'], 0.001):.1f}x",
            ),
            (
                "per tool call ≤ 4 database transactions (inside the workflow, PostgreSQL)",
                _tx(worker_call, "wf_") <= 4,
                f"{_tx(worker_call, 'wf_'):.1f} ({_tx(worker_call):.1f} with the background)",
            ),
        ]
        targets += _latency_targets(r.phases)
        for backend, got in r.ingest.items():
            targets.append(
                (
                    f"ingest ≥ 500 intents/s, p99 ≤ 50 ms, none lost ({backend})",
                    got["per_s"] >= 500 and got["p99_ms"] <= 50 and got["lost"] == 0,
                    f"{got['per_s']:.0f}/s, p99 {got['p99_ms']:.0f} ms, {got['lost']} lost",
                )
            )
        for backend, got in r.replay_long.items():
            targets.append(
                (
                    f"replay ≥ 2,000 steps/s ({backend}; {got['calls']:,} steps of"
                    f" {got['steps_per_run']}-step runs)",
                    got["calls_per_s"] >= 2000 and got["mismatched"] == 0,
                    f"{got['calls_per_s']:.0f}/s, {got['mismatched']} diverged",
                )
            )
        lines += ["| target (issues 13, 28, 29) | measured | met |", "|---|---|---|"]
        lines += [f"| {t} | {m} | {'yes' if ok else '**missed**'} |" for t, ok, m in targets]
        lines.append("")
    lines += [
        "Per step, from each system's own checkpoints (ms resolution, medians): a Gatehouse"
        " tool call from its ledger row (`calls.started_at` → `finished_at`: the claim, the"
        " call, the completion with its hash-chain link and step record; the row is its"
        " checkpoint) against a bare DBOS step that inserts one row (`operation_outputs`);"
        " \"flow\" is one step's start to the next one's. Sequential runs"
        " only (one run at a time, after the rounds), PostgreSQL only (DBOS's SQLite"
        " timestamps are whole seconds). The floor: one INSERT in autocommit on the same"
        f" server, {r.floor_ms:.2f} ms.",
        "",
        "| system | steps | own ms | flow ms | flow ÷ bare DBOS |",
        "|---|---|---|---|---|",
    ]
    for n, st in r.per_step.items():
        ratio = st["flow_ms"] / max(r.per_step[db]["flow_ms"], 0.001)
        lines.append(
            f"| {n} | {st['steps']} | {st['own_ms']:.1f} | {st['flow_ms']:.1f} | {ratio:.1f}x |"
        )
    lines += [
        "",
        "CPU per run, all rounds (sequential and in flight), ms: the system's own processes,"
        " the benchmark's process (Gatehouse's HTTP clients; a peer's caller only waits on"
        " a pipe) and the PostgreSQL backends of the system's database over the same"
        " windows (those alive at a window's end: each system's pools keep their"
        " connections, so none is missed). On this machine's"
        f" {os.cpu_count()} cores, runs/s cannot pass cores ÷ total CPU per run.",
        "",
        "| system | system processes | client | PostgreSQL | total | ceiling, runs/s"
        " | in flight, measured runs/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, spent in r.cpu.items():
        per = {k: 1000 * spent[k] / spent["runs"] for k in ("system", "client", "postgres")}
        total = sum(per.values())
        lines.append(
            f"| {n} | {per['system']:.1f} | {per['client']:.1f} | {per['postgres']:.1f}"
            f" | {total:.1f} | {1000 * (os.cpu_count() or 1) / total:.0f} | {rps[n]:.1f} |"
        )
    lines += [
        "",
        "SQL per Gatehouse run (3 tool steps) and per tool call (3-step run minus 1-step run,"
        " halved), counted on every SQLAlchemy engine of each process, the idle background"
        " taken off. Transactions = commits + rollbacks (read-only transactions end in a"
        ' rollback); write commits ran an INSERT, UPDATE or DELETE. "In the workflow":'
        " the worker's statements and transactions made inside DBOS workflows (steps,"
        " checkpoints), which no background thread adds to.",
        "",
        "| backend | process | per run: statements | transactions | write commits"
        " | per tool call: statements | transactions | write commits"
        " | in the workflow, per call: statements, transactions | idle background/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, c in r.counts.items():
        for proc in ("worker", "shim"):
            run, call, idle = c["per_run"][proc], c["per_tool_call"][proc], c["idle_per_s"][proc]
            lines.append(
                f"| {backend} | {proc} | {run['statements']:.0f} | {_tx(run):.1f}"
                f" | {run['write_commits']:.1f} | {call['statements']:.1f} | {_tx(call):.1f}"
                f" | {call['write_commits']:.1f}"
                f" | {call['wf_statements']:.1f}, {_tx(call, 'wf_'):.1f}"
                f" | {idle['statements']:.1f} stmts, {_tx(idle):.1f} tx |"
            )
    d = r.dbos_per_run
    lines += [
        "",
        "Ingest under load: a shim with no worker (only the intake is measured; nothing"
        " runs; its rate limits and queue bound lifted, which a queue nobody drains would"
        " hit at once), intents posted over HTTP by a load generator in a process of its own"
        " (one kept-alive connection per client); CPU per intent is the shim's, the"
        " generator's and the whole PostgreSQL server's over the load; afterwards every accepted"
        " intent is looked up: its run row and its DBOS queue entry. Replay: every succeeded"
        " Gatehouse run of the comparison, replayed from its ledger in the benchmark's"
        " process (each tool call served from the ledger is a step); the long replay is in"
        " the targets above.",
        "",
        "| backend | clients | seconds | accepted | intents/s | p50 ms | p99 ms | lost"
        " | CPU ms per intent: shim / generator / PostgreSQL"
        " | replayed runs | steps/s | ms per run (median) | diverged | long replay, steps/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for backend in r.ingest:
        i, p = r.ingest[backend], r.replay.get(backend, {})
        lines.append(
            f"| {backend} | {i['clients']} | {i['seconds']} | {i['accepted']}"
            f" | {i['per_s']:.0f} | {i['p50_ms']:.1f} | {i['p99_ms']:.1f} | {i['lost']}"
            f" | {_ingest_cpu(i)} | {p.get('runs', 0)} | {p.get('calls_per_s', 0.0):.0f}"
            f" | {p.get('median_ms_per_run', 0.0):.1f} | {p.get('mismatched', 0)}"
            f" | {r.replay_long[backend]['calls_per_s']:.0f} |"
        )
    lines += [
        "",
        "The shim's per-tool-call columns are its waiting clients' looks at the run's"
        " status (on SQLite one every 10 ms, so they grow with how long a run takes and can"
        " even come out negative); they are not work done per call. The per-call target is"
        " held to the worker's row.",
        "",
        f"Bare DBOS, per run, same counting: {d['statements']:.0f} statements,"
        f" {_tx(d):.1f} transactions, {d['write_commits']:.1f} write commits"
        " (background not taken off).",
        "",
        "Where a sequential run's time goes (ms, median over its runs). Gatehouse: from the"
        " rows the run wrote (ISO times to the millisecond), over the rounds' sequential runs;"
        " the peers over a sequential pass after the rounds. Bare DBOS: from its own records"
        " (the workflow's row, its `set_event` and first step in `operation_outputs`) and, for"
        " the approval, its caller's clock just before `DBOS.send`. LangGraph: its caller's"
        " clock (the first `invoke` to its return with the interrupt; the resuming `invoke`"
        " to the first step's node starting). The peers have no HTTP front door, queue or"
        " policy gate: bare DBOS's figures are the floor of the machinery Gatehouse runs on,"
        " not a like-for-like system.",
        "",
        "| phase | " + " | ".join(r.phases) + " |",
        "|---|" + "---|" * len(r.phases),
    ]
    names = list(dict.fromkeys(k for p in r.phases.values() for k in p))
    for name in names:
        cells = [
            f"{statistics.median(p[name]):.1f}" if name in p else "-" for p in r.phases.values()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Retryable error answers the Gatehouse client got and tried again: "
        + "; ".join(f"{b}: {dict(c) or 'none'}" for b, c in r.retried.items())
        + ".",
        "",
        "How it was measured:",
        "",
        "* Gatehouse: the shim (uvicorn) and one worker as separate processes"
        f" (`GATEHOUSE_WORKER_CONCURRENCY={WORKER_CONCURRENCY}`, other settings default: the"
        " worker is told of queued work at once (PostgreSQL `LISTEN`; SQLite a datagram within"
        " the host) and polls for it every 1 s besides), driven over HTTP: submit a `run-plan`"
        " of three `noop`"
        " steps, wait for the plan card with `GET /runs/{id}/wait` (a long poll the shim"
        " answers when the run's status changes: LISTEN/NOTIFY on PostgreSQL, a 10 ms look"
        " at one row on SQLite), approve it with its digest, wait until `succeeded`. How soon"
        " the client learns of each change is part of the figure.",
        "* LangGraph: `StateGraph` compile → approve (`interrupt()`) → three nodes each inserting"
        " a row, `PostgresSaver` on a psycopg pool; a run is `invoke` to the interrupt and"
        " `invoke(Command(resume=digest))`. `langgraph` is the default durability (`async`);"
        " `langgraph-sync` writes each checkpoint before the next node. In-process calls, no HTTP.",
        "* Bare DBOS: a workflow with a compile step, `set_event` (its plan card), `recv` for the"
        " approval, three steps each inserting a row; started with `DBOS.start_workflow` (no"
        " queue), approved with `DBOS.send` once `get_event` returns. In-process, no HTTP.",
        "* Bare DBOS handing off (`dbos-handoff`, the phases only): the run built as Gatehouse"
        " builds it, a stretch per decision: the workflow that puts the plan on its card ends"
        " there, and the approval queues a new workflow for the steps (`Queue.enqueue`, a"
        " queue polled every 2 ms: about 1 ms of its figure is the wait for the poll, where"
        " Gatehouse's worker is told at once). Its approval → first step is the floor of"
        " that design on DBOS; its own process, started after the rounds.",
        "* Each peer runs in its own child process; targets use the LangGraph default durability.",
        END,
    ]
    return "\n".join(lines) + "\n"


def _latency_targets(phases: dict[str, dict[str, list[float]]]) -> list[tuple[str, bool, str]]:
    """Issue 28's latency targets (medians), each with the peers' own figures beside it."""
    peers = (
        ("bare DBOS", "dbos/postgres"),
        ("bare DBOS handing off to a queued workflow", "dbos-handoff/postgres"),
        ("LangGraph", "langgraph/postgres"),
    )
    out = []
    for backend, phase, limit in (
        ("postgres", APPROVAL_TO_STEP, 5.0),
        ("sqlite", APPROVAL_TO_STEP, 20.0),
        ("postgres", SUBMIT_TO_CARD, 20.0),
    ):
        got = phases.get(f"gatehouse/{backend}", {}).get(phase)
        if not got:
            continue
        ms = statistics.median(got)
        beside = [
            f"{label} {statistics.median(theirs):.1f} ms"
            for label, name in peers
            if (theirs := phases.get(name, {}).get(phase))
        ]
        shown = f"{ms:.1f} ms" + (f" ({', '.join(beside)})" if beside else "")
        out.append((f"{phase}, p50 ≤ {limit:.0f} ms ({backend})", ms <= limit, shown))
    return out


def write_section(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """``text`` between ``begin`` and ``end`` in ``path``, or appended when they are absent."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + text.rstrip("\n") + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.write_text(new, encoding="utf-8")


def _ingest_cpu(ingested: dict[str, Any]) -> str:
    """The ingest's CPU per intent by process (an older result without it: a dash)."""
    cpu = ingested.get("cpu_ms")
    if not isinstance(cpu, dict):
        return "—"
    return f"{cpu['shim']:.2f} / {cpu['generator']:.2f} / {cpu['postgres']:.2f}"
