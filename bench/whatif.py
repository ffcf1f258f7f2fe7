"""``python -m bench.whatif``: ``gatehouse policy what-if`` over 10,000 recorded plans.

Issue 33. A fresh database per backend (SQLite; PostgreSQL when it answers), migrated,
with the policy versions a worker keeps and ``--runs`` recorded runs written in: each
a plan card of three steps (an HTTP read, a shell count, a note of what the read
returned) under the shipped profile ``guarded`` (Cedar policy set ``guardrails``), by
one of eight submitters, approved by one of three approvers, every step run (its
``run_steps`` row, with its output). A proposed policy set (the shipped one plus a
forbid on one submitter's shell steps) is then tried on them by the command itself,
``gatehouse policy what-if FILE --json``, in a process of its own: the wall time
includes its start, reading every plan, step record and approval, and every step
decided both ways as the run decided it (at submit, and again on the input it ran with
and with its approver). The target (issue 33) is under a minute for 10,000.

Results go between this module's markers in ``--out`` (``docs/benchmarks.md``); the
target is reported, never an exit code.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.hitl.report import write_section
from contracts import Plan, digest_of
from ledger import migrate, open_database, policy_versions
from ledger.policy_versions import PolicyVersion
from policies import catalog
from tests.support.stack import drop_database, fresh_database_url, postgres_available

BEGIN = "<!-- bench:whatif begin -->"
END = "<!-- bench:whatif end -->"
TARGET_S = 60.0
SUBMITTERS = [f"user{n}" for n in range(8)]
APPROVERS = ["ann", "bob", "olga"]
PROPOSED = """
@id("user3-no-shell")
forbid (principal == Gatehouse::User::"user3", action == Gatehouse::Action::"restricted_shell",
        resource);
"""


def _plan(n: int) -> dict[str, Any]:
    return {
        "objective": f"what-if bench {n}",
        "steps": [
            {
                "step_id": "read",
                "verb": "fetch",
                "connector_id": "local-http",
                "driver_kind": "http",
                "input": {"method": "GET", "url": f"http://127.0.0.1:8000/items/{n}"},
            },
            {
                "step_id": "count",
                "verb": "run",
                "connector_id": "workspace-shell",
                "driver_kind": "restricted_shell",
                "input": {"argv": ["wc", "-l", f"file{n}.txt"]},
            },
            {
                "step_id": "keep",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input_from": {"step_id": "read", "pointer": "/json"},
            },
        ],
    }


# What each step of run n recorded (run_steps): (step_id, driver kind, connector, output)
def _outputs(n: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    read = {"status": 200, "json": {"n": n, "name": f"item {n}"}}
    return [
        ("read", "http", "local-http", read),
        ("count", "restricted_shell", "workspace-shell", {"exit_code": 0, "stdout": f"{n}\n"}),
        ("keep", "noop", "note", {"echo": read["json"]}),
    ]


def _keep_catalog(conn: sa.Connection) -> None:
    kept = [
        PolicyVersion(p.digest, "profile", p.model.profile_id, p.text)
        for p in catalog.list_profiles()
    ]
    kept += [
        PolicyVersion(t.digest, "tool_pool", t.model.tool_pool_id, t.text)
        for t in catalog.list_tool_pools()
    ]
    kept += [
        PolicyVersion(c.digest, "cedar", c.model.policy_set_id, c.text)
        for c in catalog.list_cedar_policy_sets()
    ]
    policy_versions.keep(conn, kept)


def record(url: str, runs: int) -> float:
    """``runs`` recorded plans written in; the seconds it took."""
    started = time.perf_counter()
    profile = catalog.profile("guarded")
    pool = catalog.tool_pool("default")
    rules = profile.model.cedar_rules
    assert rules is not None
    base = datetime(2026, 11, 1, tzinfo=UTC)
    db = open_database(url)
    try:
        migrate(db)
        with db.engine.begin() as conn:
            _keep_catalog(conn)
            intents, rows, cards, steps, approvals = [], [], [], [], []
            for n in range(runs):
                stamp = (base + timedelta(seconds=n)).isoformat()
                who = SUBMITTERS[n % len(SUBMITTERS)]
                plan = Plan.model_validate(_plan(n)).model_dump(mode="json")
                digest = digest_of(plan)
                intents.append({"i": f"int_{n:032x}", "j": "{}", "d": digest, "s": who, "t": stamp})
                rows.append(
                    {
                        "r": f"run_{n:032x}",
                        "i": f"int_{n:032x}",
                        "s": who,
                        "t": stamp,
                        "pd": profile.digest,
                        "td": pool.digest,
                        "cd": rules.digest,
                        "dg": digest,
                    }
                )
                cards.append({"r": f"run_{n:032x}", "p": json.dumps(plan), "d": digest, "t": stamp})
                approvals.append(
                    {
                        "a": f"apr_{n:032x}",
                        "r": f"run_{n:032x}",
                        "d": digest,
                        "b": APPROVERS[n % len(APPROVERS)],
                        "t": stamp,
                    }
                )
                for position, (sid, kind, connector, output) in enumerate(_outputs(n)):
                    steps.append(
                        {
                            "r": f"run_{n:032x}",
                            "s": sid,
                            "p": position,
                            "k": kind,
                            "c": connector,
                            "o": json.dumps(output),
                            "t": stamp,
                        }
                    )
            conn.execute(
                sa.text(
                    "INSERT INTO intents (intent_id, request_json, request_digest, submitted_by,"
                    " created_at) VALUES (:i, :j, :d, :s, :t)"
                ),
                intents,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO runs (run_id, intent_id, recipe, objective, mode, status, phase,"
                    " submitted_by, policy_profile, tool_pool, plan_digest, created_at,"
                    " updated_at, profile_digest, tool_pool_digest, cedar_digest) VALUES"
                    " (:r, :i, 'echo', 'what-if bench', 'run-plan', 'succeeded', 'done', :s,"
                    " 'guarded', 'default', :dg, :t, :t, :pd, :td, :cd)"
                ),
                rows,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO plan_cards (run_id, plan_json, plan_digest, status, created_at,"
                    " updated_at) VALUES (:r, :p, :d, 'approved', :t, :t)"
                ),
                cards,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision,"
                    " decided_by, decided_at) VALUES (:a, :r, :d, 'approved', :b, :t)"
                ),
                approvals,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id,"
                    " status, output_json, finished_at) VALUES (:r, :s, :p, :k, :c, 'succeeded',"
                    " :o, :t)"
                ),
                steps,
            )
    finally:
        db.dispose()
    return time.perf_counter() - started


def what_if(url: str, proposed: Path) -> tuple[float, dict[str, Any]]:
    """The command in a process of its own: (wall seconds, its JSON report)."""
    started = time.perf_counter()
    out = subprocess.run(
        [
            str(Path(sys.executable).with_name("gatehouse")),
            "policy",
            "what-if",
            str(proposed),
            "--database-url",
            url,
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    report: dict[str, Any] = json.loads(out.stdout)
    return took, report


def measure(backend: str, runs: int, tmp: Path) -> dict[str, Any]:
    url = fresh_database_url(backend, tmp)
    proposed = tmp / "guardrails.cedar"
    found = catalog.cedar_policy_set("guardrails")
    assert found is not None
    proposed.write_text(found.model.text + PROPOSED)
    try:
        written = record(url, runs)
        took, report = what_if(url, proposed)
    finally:
        drop_database(url)
    expected = sum(SUBMITTERS[n % len(SUBMITTERS)] == "user3" for n in range(runs))
    # the report must be right, not only fast: user3's shell step, in each of its runs
    assert report["runs_evaluated"] == runs, report
    assert report["runs_changed"] == expected and report["steps_now_refused"] == expected
    # every step ran: each decided on the input it had, with its approver
    assert report["steps_ran"] == report["steps_evaluated"], report
    assert {c["decided_as"] for r in report["runs"] for c in r["changes"]} == {"ran"}
    return {
        "backend": backend,
        "runs": runs,
        "steps": report["steps_evaluated"],
        "written_s": written,
        "what_if_s": took,
        "changed": report["runs_changed"],
    }


def section(found: list[dict[str, Any]]) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## What-if over recorded runs (issue 33)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:whatif` (`bench/whatif.py`); do not edit"
        " by hand.",
        "",
        f"* when: {when}; machine: {_cores()} cores, Python {platform.python_version()}",
        "",
        "| backend | recorded runs | steps decided twice | `policy what-if` wall (s)"
        " | runs/s | target | met | runs changed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in found:
        met = "yes" if f["what_if_s"] < TARGET_S else "**no**"
        lines.append(
            f"| {f['backend']} | {f['runs']:,} | {f['steps']:,} | {f['what_if_s']:.1f}"
            f" | {f['runs'] / f['what_if_s']:,.0f} | < {TARGET_S:.0f} s | {met}"
            f" | {f['changed']:,} |"
        )
    lines += [
        "",
        "* Each run is a plan card of three steps (an HTTP read, a shell count, a note of what"
        " the read returned, via `input_from`) under the shipped profile `guarded` (Cedar set"
        " `guardrails`), by one of eight submitters, approved by one of three approvers, every"
        " step run and recorded with its output. The proposed set is the shipped one plus a"
        " forbid on one submitter's shell steps: a run in eight changes, and the bench checks"
        " the report says exactly that.",
        "* The wall time is the command in a process of its own (`gatehouse policy what-if"
        " FILE --json`): its start, the read of every plan card, step record, approval and"
        " kept policy version, and every step decided under the rules of its time and under"
        " the proposed ones as the run decided it: as at submit, and again on the input it"
        " ran with (the note's resolved from the read's output) with its approver (the"
        " deny-by-default gate, then Cedar, for the run's submitter).",
        END,
    ]
    return "\n".join(lines) + "\n"


def _cores() -> int:
    import os  # noqa: PLC0415  (only here)

    return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.whatif", description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000, help="recorded runs to write in")
    parser.add_argument("--out", type=Path, help="write the section into this file")
    args = parser.parse_args(argv)
    backends = ["sqlite", *(["postgres"] if postgres_available() else [])]
    found = []
    with tempfile.TemporaryDirectory(prefix="gh-whatif-") as tmp:
        for backend in backends:
            got = measure(backend, args.runs, Path(tmp))
            print(
                f"{backend}: {got['runs']} runs written in {got['written_s']:.1f} s;"
                f" what-if {got['what_if_s']:.1f} s, {got['changed']} runs changed",
                flush=True,
            )
            found.append(got)
    text = section(found)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
