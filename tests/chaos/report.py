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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="copy var/chaos/*.json first")
    parser.add_argument("--from", dest="source", default="var/chaos", help="where --record reads")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    if args.record:
        for tier in TIERS:
            found = Path(args.source) / f"{tier}.json"
            if found.exists():
                shutil.copyfile(found, RESULTS / f"{tier}.json")
    results = {
        t: json.loads((RESULTS / f"{t}.json").read_text(encoding="utf-8"))
        for t in TIERS
        if (RESULTS / f"{t}.json").exists()
    }
    text = DOC.read_text(encoding="utf-8")
    if START not in text or END not in text:
        sys.stderr.write(f"{DOC} has no figures markers\n")
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{render(results)}\n{END}{tail}", encoding="utf-8")
    sys.stdout.write(f"wrote the figures of {', '.join(results) or 'no tier'} into {DOC}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
