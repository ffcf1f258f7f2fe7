"""Issue 18, a full disk under PostgreSQL: Gatehouse's database -- its own tables and
DBOS's -- in a tablespace on a small tmpfs, filled with a ballast file while runs are
in flight, then freed. The server's WAL and catalogs stay on the roomy disk, as on a
deployment whose data volume fills while the server itself keeps running.

PostgreSQL refuses a write that needs a new page with ``disk_full`` (SQLSTATE
53100) and goes on serving everything else. Then:

1. submissions answer 507 ``storage_full`` with ``Retry-After``, never a 500 and
   never 503 ``database_unavailable`` (the database is there; its disk is not);
   one that still fits in pages the tables hold is accepted and must finish;
2. workers wait the disk out in place (their ledger writes are tried again; DBOS
   retries its own writes on "insufficient resources"); none exits;
3. once the ballast is removed every run ends, and the shared invariants hold.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.chaos.client import say
from tests.chaos.fill import runs_in_flight, space_waits, submit_while_full
from tests.chaos.harness import DB_NAME, TABLESPACE, WORKER_ENV, running_stack
from tests.chaos.invariants import assert_held, record, settle_and_check
from tests.chaos.scenario import SCALES, Scenario
from tests.support import pgcluster, smallfs

RUNS_BEFORE = 8  # in flight when the disk fills
SUBMITS_WHILE_FULL = 5
FULL_S = 10.0  # how long the disk stays full, at least
WAIT_S = 60.0  # at most, when no worker write has found it full yet
SIZE_KIB = 64 * 1024  # a fresh database (a copy of template1) and the runs fit


def _held_until_a_worker_waits(logs: Path, at_least_s: float, at_most_s: float) -> float:
    started = time.monotonic()
    while True:
        held = time.monotonic() - started
        if (held >= at_least_s and space_waits(logs) > 0) or held >= at_most_s:
            return held
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_full_postgres_disk_refuses_cleanly_and_runs_resume(tmp_path: Path) -> None:
    for reason in (pgcluster.unavailable_reason(), smallfs.unavailable_reason()):
        if reason is not None:
            pytest.skip(f"no private cluster on a small filesystem: {reason}")
    # Directly under the temp root, as the cluster's own folder: pytest's tmp_path is
    # private to root, and the server's user must reach the tablespace.
    with contextlib.ExitStack() as hold:
        mount = Path(tempfile.mkdtemp(prefix="gh-pgfs-"))
        hold.callback(shutil.rmtree, mount, ignore_errors=True)  # last, once unmounted
        mount.chmod(0o755)
        fs = hold.enter_context(smallfs.small_fs(mount, SIZE_KIB))
        stack = hold.enter_context(
            running_stack(
                tmp_path / "stack",
                WORKER_ENV,
                sink_delay_s=1.0,  # each effect takes a moment: the fill finds calls in flight
                tablespace=fs.root / "tablespace",
            )
        )
        where = stack.pg.query(
            "postgres",
            "SELECT t.spcname FROM pg_database d JOIN pg_tablespace t"
            " ON t.oid = d.dattablespace WHERE d.datname = :db",
            db=DB_NAME,
        )
        assert where == [(TABLESPACE,)], where
        stack.start_workers(["w1", "w2"])
        sc = Scenario(stack, SCALES["ci"], seed=53)
        sc.resolver.start()
        try:
            runs_in_flight(sc, RUNS_BEFORE)
            say(f"filling the database's disk for {FULL_S:.0f} s or more")
            ballast = fs.fill()
            full = submit_while_full(sc, SUBMITS_WHILE_FULL)
            refused = full["refused"]
            # Until a worker's write found the disk full too (or WAIT_S has passed): a
            # write that still fits in a page its table holds goes through.
            held_s = _held_until_a_worker_waits(stack.root / "logs", FULL_S, WAIT_S)
            say("freeing the disk")
            fs.free()
            for run_id in full["accepted"]:
                sc.decide(run_id)
            results = settle_and_check(sc, 120)
        finally:
            sc.resolver.stop()
        exits = stack.figures.get("worker_exits_unexpected")
        waits = space_waits(stack.root / "logs")
        server_log = stack.pg.log.read_text(errors="replace")
        refusals_by_server = server_log.count("No space left on device")
        runs = len(sc.book.all())

    results.update(
        {
            "ballast_bytes": ballast,
            "full_s": round(held_s, 1),
            "submits_while_full": {"refused": refused, "accepted": len(full["accepted"])},
            "worker_waits_for_space": waits,
            "server_disk_full_errors": refusals_by_server,
            "worker_exits_unexpected": exits,
        }
    )
    record("disk_pg", results, {"disk_fills": 1})
    say(f"submissions while full: {len(full['accepted'])} accepted, refused: {refused}")
    say(f"writes PostgreSQL refused for want of space: {refusals_by_server}")
    say(f"worker writes that waited for space: {waits}")

    assert len(refused) == SUBMITS_WHILE_FULL, full
    assert all(
        a["status"] == 507 and a["code"] == "storage_full" and a["retryable"] and a["retry_after"]
        for a in refused
    ), refused
    assert refusals_by_server > 0, "PostgreSQL never found its disk full: the fault missed"
    assert waits > 0, "no worker write found the disk full: the fault missed the runs"
    assert exits == 0
    assert results["runs"] == runs == RUNS_BEFORE + len(full["accepted"])
    assert results["runs_by_status"] == {"succeeded": runs}, results["runs_by_status"]
    assert_held(results)
