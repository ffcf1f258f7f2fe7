"""Issue 18, a full disk: the SQLite file on one small tmpfs, the worker workspaces and
the evidence (the anchor file, an exported bundle) on another, each filled with a
ballast file while runs are in flight, then freed.

1. files full — the database has room, the workspaces and the anchor file none:
   a run's end (its anchor line) cannot be written, so no run may be recorded
   as finished; an evidence export fails with ``storage_full`` and leaves no file.
2. database full — submissions answer 507 ``storage_full`` (Retry-After), never a
   500, and store nothing (one SQLite still fits in reused WAL pages is accepted,
   and must finish like any other).
3. both freed — every accepted run resumes and succeeds; the shared invariants
   hold (nothing lost, duplicated or unexpected; every chain verifies, every run
   replays); the anchor file holds only whole lines; ``PRAGMA integrity_check`` ok.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, GatehouseError
from ledger.anchors import append_line, from_file
from tests.chaos.client import say
from tests.chaos.fill import count_in_logs, runs_in_flight, space_waits, submit_while_full
from tests.chaos.harness import WORKER_ENV, Stack, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.scenario import SCALES, Scenario
from tests.support.smallfs import SmallFs, small_fs, unavailable_reason

RUNS_BEFORE = 6  # in flight when the disks fill
SUBMITS_WHILE_FULL = 5
FULL_S = 8.0  # how long each disk stays full
GATEHOUSE = Path(sys.executable).parent / "gatehouse"
ENDED = frozenset({"succeeded", "failed", "rejected", "cancelled"})


def _export(stack: Stack, run_id: str, out: Path, key: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(GATEHOUSE), "evidence", "export", run_id, "-o", str(out)]
    env = {"GATEHOUSE_DATABASE_URL": stack.database_url, "GATEHOUSE_SIGNING_KEY": str(key)}
    return subprocess.run(
        cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def _anchor_lines(path: Path) -> tuple[int, int]:
    """(whole checkpoint lines, lines that are not one) in the anchor file."""
    whole = broken = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            json.loads(line)["checkpoint"]["run_id"]
            whole += 1
        except (ValueError, KeyError, TypeError):
            broken += 1
    return whole, broken


def _integrity(db_file: Path) -> str:
    with sqlite3.connect(db_file) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _held_full(sc: Scenario, fs: SmallFs, run_ids: list[str], seconds: float) -> list[str]:
    """Keep ``fs`` full for ``seconds``; the runs that were still open when it filled and
    were seen ended meanwhile (a run's end writes its anchor line: there must be none)."""
    open_ids = [r for r in run_ids if sc.status(r) not in ENDED]
    fs.fill()
    ended: set[str] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ended.update(r for r in open_ids if sc.status(r) in ENDED)
        time.sleep(0.5)
    say(f"{len(open_ids)} run(s) open when the disk filled; {len(ended)} ended while full")
    return sorted(ended)


@pytest.mark.timeout(60)
def test_an_anchor_line_is_whole_or_absent_on_a_full_disk(tmp_path: Path) -> None:
    """An append that does not fit (ENOSPC or a short write) is ``storage_full`` and
    leaves the file as it was; once space is freed the next append reads back whole."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no small filesystem to fill: {reason}")
    run_id = "run_" + "a" * 32
    record: dict[str, Any] = {"checkpoint": {"run_id": run_id, "entries": 1, "head": "0" * 64}}
    with small_fs(tmp_path / "fs", 64) as fs:
        anchors = fs.root / "anchors.jsonl"
        append_line(anchors, record)
        size = anchors.stat().st_size
        fs.fill(leave_bytes=0)
        record["checkpoint"]["pad"] = "x" * 8192  # more than any page left
        with pytest.raises(GatehouseError) as refused:
            append_line(anchors, record)
        assert refused.value.code is ErrorCode.STORAGE_FULL
        assert anchors.stat().st_size == size  # nothing half-written left behind
        fs.free()
        append_line(anchors, record)
        assert [a.entries for a in from_file(anchors, run_id)] == [1, 1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_full_disk_refuses_cleanly_and_runs_resume(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no small filesystem to fill: {reason}")
    # Logs and tokens stay on the roomy disk: only Gatehouse's own data is on the small ones.
    with (
        small_fs(tmp_path / "dbfs", 16 * 1024) as dbfs,
        small_fs(tmp_path / "filesfs", 4 * 1024) as files,
    ):
        db_file = dbfs.root / "gatehouse.sqlite"
        anchors = files.root / "evidence" / "anchors.jsonl"
        key = tmp_path / "signing.pem"
        subprocess.run(
            [str(GATEHOUSE), "evidence", "keygen", "-o", str(key)],
            check=True,
            capture_output=True,
        )
        with running_stack(
            tmp_path / "stack",
            WORKER_ENV,
            sink_delay_s=0.5,  # each effect takes a moment: the fills find calls in flight
            database_url=f"sqlite:///{db_file}",
            workspace_root=files.root / "workspaces",
            shim_env={"GATEHOUSE_ANCHOR_FILE": str(anchors)},
        ) as stack:
            stack.start_workers(["w1", "w2"])
            sc = Scenario(stack, SCALES["ci"], seed=18)
            sc.resolver.start()
            try:
                first = runs_in_flight(sc, RUNS_BEFORE)

                say(f"filling the workspace and evidence disk for {FULL_S:.0f} s")
                ended_while_full = _held_full(sc, files, first, FULL_S)
                export = _export(stack, first[0], files.root / "evidence" / "b.bundle", key)
                left_in_evidence = sorted(p.name for p in (files.root / "evidence").iterdir())

                second = [sc.submit(sc.plan(list(sc.channels))) for _ in range(2)]
                for run_id in second:
                    sc.decide(run_id)
                say(f"filling the database disk too, for {FULL_S:.0f} s")
                dbfs.fill()
                full = submit_while_full(sc, SUBMITS_WHILE_FULL)
                refused = full["refused"]
                time.sleep(FULL_S)
                say("freeing both disks")
                dbfs.free()
                files.free()
                for run_id in full["accepted"]:
                    sc.decide(run_id)
                results = settle_and_check(sc, 90)
            finally:
                sc.resolver.stop()
            exits = stack.figures.get("worker_exits_unexpected")
            waits = space_waits(stack.root / "logs")
            stranded = count_in_logs(stack.root / "logs", "stopped on a full disk")
            stack_runs = len(sc.book.all())
        whole, broken = _anchor_lines(anchors)
        integrity = _integrity(db_file)

    results.update(
        {
            "submits_while_full": {"refused": refused, "accepted": len(full["accepted"])},
            "worker_waits_for_space": waits,
            "runs_stranded_then_resumed": stranded,
            "export_while_full": {"rc": export.returncode, "stderr": export.stderr.strip()[-300:]},
            "evidence_dir_while_full": left_in_evidence,
            "ended_while_files_full": ended_while_full,
            "anchor_lines": {"whole": whole, "broken": broken},
            "integrity_check": integrity,
            "worker_exits_unexpected": exits,
        }
    )
    record("disk", results, {"disk_fills": 2})
    say(f"submissions while full: {len(full['accepted'])} accepted, refused: {refused}")
    say(f"worker writes that waited for space: {waits}; runs stranded and resumed: {stranded}")
    say(f"export while full: rc {export.returncode}: {export.stderr.strip()[-200:]}")
    say(f"anchor file: {whole} whole line(s), {broken} broken; integrity_check: {integrity}")

    assert len(refused) == SUBMITS_WHILE_FULL, full
    assert waits > 0, "no worker write found a disk full: the fault missed the runs"
    assert all(
        a["status"] == 507 and a["code"] == "storage_full" and a["retryable"] and a["retry_after"]
        for a in refused
    ), refused
    assert export.returncode == 1 and "storage_full" in export.stderr, export.stderr
    assert left_in_evidence == ["anchors.jsonl"] or left_in_evidence == [], left_in_evidence
    assert ended_while_full == [], ended_while_full
    assert broken == 0 and whole >= stack_runs, (whole, broken, stack_runs)
    assert integrity == "ok"
    assert exits == 0
    runs = RUNS_BEFORE + 2 + len(full["accepted"])
    assert results["runs"] == runs
    assert results["runs_by_status"] == {"succeeded": runs}, results["runs_by_status"]
    assert_held(results)
