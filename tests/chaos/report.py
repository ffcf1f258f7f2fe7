"""Render the chaos suite's measured figures into docs/reliability.md.

    python -m tests.chaos.report            # re-render from tests/chaos/results/*.json
    python -m tests.chaos.report --record   # first copy var/chaos/*.json (the last runs) there

Only the part of the page between the ``figures`` markers is written; the
prose around it is edited by hand. Every number comes from a results file a
real run of ``tests/chaos/test_chaos.py`` wrote.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "render"]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOC = HERE.parent.parent / "docs" / "reliability.md"
START = "<!-- figures:start (written by python -m tests.chaos.report) -->"
END = "<!-- figures:end -->"
TIERS = ("ci", "soak")
SCENARIOS_START = "<!-- scenarios:start (written by python -m tests.chaos.report) -->"
SCENARIOS_END = "<!-- scenarios:end -->"
SOAK_START = "<!-- soak:start (written by python -m tests.chaos.report) -->"
SOAK_END = "<!-- soak:end -->"

# Each fault scenario: the results file its test writes (var/chaos/<name>.json),
# how the fault is injected and what Gatehouse does about it.
SCENARIOS: dict[str, tuple[str, str, str]] = {
    "ci": (
        "crashes (the chaos suite, ci tier)",
        "kill -9 of workers at random and at named crash points, a slot killed for good,"
        " PostgreSQL `-m immediate` restarts, `pg_terminate_backend`",
        "DBOS recovers each worker's runs on restart; the reaper hands a dead slot's runs"
        " over; calls cut off without an idempotency key are flagged in doubt",
    ),
    "network": (
        "network faults to PostgreSQL",
        "a TCP proxy between every process and the database: latency, connections dropped"
        " mid-transaction, a black hole, a partition that heals",
        "TCP keepalives and timeouts end dead connections in bounded time; work resumes"
        " when the network heals",
    ),
    "disk": (
        "full disk",
        "the SQLite file, workspaces and evidence on a small tmpfs filled with ballast",
        "writes fail with a stable code; nothing half-written counts as done; runs resume"
        " once space is freed",
    ),
    "disk_pg": (
        "full disk, PostgreSQL",
        "Gatehouse's database (its tables and DBOS's) in a tablespace on a small tmpfs"
        " filled with ballast; the server's WAL on the roomy disk",
        "`disk_full` (53100) answered 507 `storage_full`; workers and DBOS wait it out in"
        " place; runs resume once space is freed",
    ),
    "overload": (
        "overload",
        "two submitters flood the shim while no worker runs, then workers drain with one killed",
        "503 `overloaded` / 429 `queue_share_exceeded` with Retry-After; reads answered;"
        " nothing refused is stored, nothing accepted is dropped",
    ),
    "upgrade_same_version": (
        "upgrade, flow unchanged",
        "runs waiting approval and mid-plan; a worker killed, the rest stopped; the next"
        " release's migration applied; its workers started under the same version",
        "the new workers resume every run (DBOS recovers by executor id and version)",
    ),
    "upgrade_new_version": (
        "upgrade, flow changed",
        "as above, the new release under a bumped `GATEHOUSE_APP_VERSION`",
        "`/workers` and `/readyz` name the unserved old version; old workers kept until"
        " drained finish the old runs, new ones take new runs",
    ),
    "clock": (
        "clock jumps",
        "the workers' and the shim's wall clock stepped forward and back with libfaketime",
        "timeouts and the stall detector run on the monotonic clock; liveness on heartbeat"
        " counters, ages on the database's clock; ledger order is by sequence and hash chain",
    ),
    "soak-short": (
        "soak (short form, in `check`)",
        "`gatehouse up --workers 3`, runs at a steady rate, a worker killed every 30 s",
        "memory, open files, connections and bytes per run sampled; see below",
    ),
    "soak-long": (
        "soak (`mise run soak`)",
        "`gatehouse up --workers 3`, 10,000 runs over an hour, a worker killed every 3 min",
        "memory, open files, connections and bytes per run sampled; see below",
    ),
}


def _get(r: dict[str, Any], *path: str) -> Any:
    value: Any = r
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    by = r.get("runs_by_status", {})
    storm = r.get("approval_storm", {})
    checker = r.get("checker", {})
    cases = r.get("crash_cases", {})
    return [
        ("recorded", f"{r.get('recorded_at', '?')}, seed {r.get('seed')}, {r.get('cpus')} CPUs"),
        ("wall time of the scenario", f"{r.get('wall_s')} s"),
        (
            "— crash points / probe / storm / load / settle / check",
            " / ".join(
                f"{_get(r, 'phase_s', k)}"
                for k in (
                    "crash_points",
                    "route_probe",
                    "approval_storm",
                    "load",
                    "settle",
                    "check",
                )
            )
            + " s",
        ),
        (
            "runs (succeeded / rejected / other)",
            f"{r.get('runs')} ({by.get('succeeded', 0)} / {by.get('rejected', 0)}"
            f" / {sum(v for k, v in by.items() if k not in ('succeeded', 'rejected'))})",
        ),
        ("worker kills, total", str(_get(r, "kills", "total"))),
        ("— kill -9 at a random moment", str(_get(r, "kills", "random"))),
        ("— at a named crash point", str(_get(r, "kills", "crash_point"))),
        ("— killed for good (runs handed over by the reaper)", str(_get(r, "kills", "for_good"))),
        (
            "runs of the slot killed for good / adopted",
            f"{r.get('orphaned_by_kill_for_good')} / {r.get('adopted_from_killed_for_good')}",
        ),
        ("worker restarts by the harness", str(r.get("worker_restarts"))),
        ("worker exits nobody caused", str(r.get("worker_exits_unexpected"))),
        ("PostgreSQL crash-restarts (-m immediate)", str(r.get("db_restarts"))),
        ("— time the database was away, in all", f"{r.get('db_down_s')} s"),
        (
            "pg_terminate_backend rounds (sessions ended)",
            f"{r.get('terminate_rounds')} ({r.get('terminated_backends')})",
        ),
        (
            "intents submitted twice at once / became two runs",
            f"{r.get('double_submits')} / {r.get('split_intents')}",
        ),
        (
            "concurrent decisions on one run: took effect / same decision 200 / refused 409",
            f"{storm.get('decisions')}: {storm.get('took_effect')} /"
            f" {storm.get('same_decision_repeats_200')} / {storm.get('refused_409')}",
        ),
        ("crash-point cases as expected", f"{cases.get('passed')} / {cases.get('total')}"),
        (
            "effects expected / observed",
            f"{r.get('effects_expected')} / {r.get('effects_observed')}",
        ),
        ("checker: ok", str(checker.get("ok"))),
        ("checker: in doubt (flagged, resolved)", str(checker.get("in_doubt"))),
        ("checker: lost", str(checker.get("lost"))),
        ("checker: duplicated", str(checker.get("duplicated"))),
        ("checker: unexpected", str(checker.get("unexpected"))),
        (
            "calls cut off by a kill after their effect (sink answer lost)",
            str(r.get("cut_off_by_kills")),
        ),
        (
            "interrupted non-idempotent calls known / unflagged",
            f"{r.get('interrupted_non_idempotent')} / {checker.get('unflagged')}",
        ),
        (
            "in-doubt calls resolved applied / not_applied",
            f"{_get(r, 'in_doubt_resolved', 'applied')}"
            f" / {_get(r, 'in_doubt_resolved', 'not_applied')}",
        ),
        (
            "in-doubt flags left unresolved or resolved against the sink",
            str(checker.get("misresolved")),
        ),
        ("ledger chains verified", f"{r.get('ledger_verified')} / {r.get('runs')}"),
        ("replays matching the trace digest", f"{r.get('replay_matched')} / {r.get('runs')}"),
        ("outbound calls made by replays", str(r.get("replay_outbound_calls"))),
        ("HTTP answers 503 (database away)", str(_get(r, "http", "answered_503"))),
        ("HTTP answers 5xx other than 503", str(_get(r, "http", "answered_5xx_not_503"))),
        ("failures", str(len(r.get("failures", [])))),
    ]


def render(results: dict[str, dict[str, Any]]) -> str:
    tiers = [t for t in TIERS if t in results]
    if not tiers:
        return (
            "No results recorded yet: run the suite, then `python -m tests.chaos.report --record`."
        )
    labels = [label for label, _ in _rows(results[tiers[0]])]
    table = {t: dict(_rows(results[t])) for t in tiers}
    lines = ["| figure | " + " | ".join(f"{t} tier" for t in tiers) + " |"]
    lines.append("|---|" + "---|" * len(tiers))
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(table[t].get(label, "") for t in tiers) + " |")
    probe = results[tiers[0]].get("route_probe", {})
    if probe:
        lines += ["", f"Route probe ({tiers[0]} tier), the database stopped:", ""]
        lines += ["| route | answer |", "|---|---|"]
        lines += [f"| `{route}` | {code} |" for route, code in sorted(probe.items())]
    return "\n".join(lines)


def render_scenarios(results: dict[str, dict[str, Any]]) -> str:
    """One row per fault scenario that has recorded figures."""
    lines = [
        "| fault | how it is injected | what Gatehouse does | last run: faults, runs,"
        " lost / duplicated / unexpected, flagged, replayed |",
        "|---|---|---|---|",
    ]
    for name, (fault, how, does) in SCENARIOS.items():
        r = results.get(name)
        if r is None:
            continue
        c = r["counts"]
        figures = (
            f"{c['faults_injected']} faults, {c['runs']} runs,"
            f" {c['lost']} / {c['duplicated']} / {c['unexpected']},"
            f" {c['flagged']} flagged, {c['replayed']} replayed"
        )
        lines.append(f"| {fault} | {how} | {does} | {figures} ({r.get('recorded_at', '?')}) |")
    return "\n".join(lines)


def render_soak(results: dict[str, dict[str, Any]]) -> str:
    """The long soak's curves (the short form's when no long one is recorded)."""
    name = "soak-long" if "soak-long" in results else "soak-short"
    r = results.get(name)
    if r is None or "soak" not in r:
        return "No soak recorded yet: run it, then `python -m tests.chaos.report --record`."
    s = r["soak"]
    c, t = s["curves"], s["timings"]
    lines = [
        f"Last {'long' if name == 'soak-long' else 'short'} soak: {r['recorded_at']},"
        f" {s['runs_asked']} runs over {s['minutes']} min ({s['wall_s']} s with the"
        f" settling), {s['worker_kills']} workers killed, {r['cpus']} CPUs;"
        f" {s['samples']} samples.",
        "",
        "| t (s) | " + " | ".join(str(x) for x in c["t_s"]) + " |",
        "|---|" + "---|" * len(c["t_s"]),
    ]
    for key, label in (
        ("runs_finished", "runs ended"),
        ("workers_rss_mb", "workers' memory, MB (3 together)"),
        ("shim_rss_mb", "shim memory, MB"),
        ("workers_open_files", "workers' open files"),
        ("shim_open_files", "shim open files"),
        ("db_connections", "database sessions"),
        ("table_mb", "tables, MB"),
    ):
        lines.append(f"| {label} | " + " | ".join(str(x) for x in c[key]) + " |")
    lines += [
        "",
        "| figure | first quarter (median) | last quarter (median) | max |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("workers_rss_mb", "workers' memory, MB"),
        ("shim_rss_mb", "shim memory, MB"),
        ("workers_open_files", "workers' open files"),
        ("shim_open_files", "shim open files"),
        ("db_connections", "database sessions"),
    ):
        lines.append(
            f"| {label} | {c[key + '_first_quarter_median']} |"
            f" {c[key + '_last_quarter_median']} | {c[key + '_max']} |"
        )
    lines += [
        "",
        f"Bytes each run leaves in the tables: {c['table_bytes_per_run']}."
        f" Approval to end, first tenth of the runs: median {t['first_tenth']['median_s']} s,"
        f" p95 {t['first_tenth']['p95_s']} s; last tenth: median"
        f" {t['last_tenth']['median_s']} s, p95 {t['last_tenth']['p95_s']} s"
        f" (ratio {t['median_ratio_last_to_first']}).",
    ]
    return "\n".join(lines)


def _between(text: str, start: str, end: str, body: str) -> str:
    if start not in text or end not in text:
        raise ValueError(f"{DOC} has no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def load_scenarios() -> dict[str, dict[str, Any]]:
    return {
        n: json.loads((RESULTS / f"{n}.json").read_text(encoding="utf-8"))
        for n in SCENARIOS
        if (RESULTS / f"{n}.json").exists()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="copy var/chaos/*.json first")
    parser.add_argument("--from", dest="source", default="var/chaos", help="where --record reads")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    if args.record:
        for tier in (*TIERS, *SCENARIOS):
            found = Path(args.source) / f"{tier}.json"
            if found.exists():
                shutil.copyfile(found, RESULTS / f"{tier}.json")
    results = {
        t: json.loads((RESULTS / f"{t}.json").read_text(encoding="utf-8"))
        for t in TIERS
        if (RESULTS / f"{t}.json").exists()
    }
    text = DOC.read_text(encoding="utf-8")
    try:
        text = _between(text, START, END, render(results))
        scenarios = load_scenarios()
        text = _between(text, SCENARIOS_START, SCENARIOS_END, render_scenarios(scenarios))
        text = _between(text, SOAK_START, SOAK_END, render_soak(scenarios))
    except ValueError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    DOC.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote the figures of {', '.join(results) or 'no tier'} into {DOC}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
