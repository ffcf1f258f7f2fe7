"""``gatehouse up`` against a database that is not there yet, then crash-restarts.

The supervisor starts before PostgreSQL: its workers wait for the database and
the shim is tried again until it can start. Once it is up, PostgreSQL crash-
restarts while a worker is killed; the supervisor starts the worker again (it
waits for the database) and runs still end, each effect applied once.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from shim.local import free_port
from tests.chaos.client import say
from tests.chaos.crashpoints import wait_until
from tests.chaos.model import Channel, make_plan
from tests.chaos.sink import Sink
from tests.support.pgcluster import PgCluster, unavailable_reason


def _workers_ready(var: Path, n: int) -> bool:
    logs = [var / f"worker-{i}.log" for i in range(1, n + 1)]
    return all(p.exists() and "ready" in p.read_text(errors="replace") for p in logs)


def _pids(log: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for m in re.finditer(r"worker (worker-\d+) pid (\d+)", log.read_text()):
        found[m.group(1)] = int(m.group(2))
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_up_waits_for_the_database_and_rides_out_restarts(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no private PostgreSQL cluster: {reason}")
    with PgCluster() as pg, Sink() as sink:
        url = pg.create_database("gh_up")
        pg.stop("immediate")  # gatehouse up starts before its database does
        var = tmp_path / "var"
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "up.log"
        gatehouse = Path(sys.executable).parent / "gatehouse"
        with log.open("wb") as out:
            up = subprocess.Popen(
                [str(gatehouse), "up", "--database-url", url, "--port", str(port),
                 "--workers", "2", "--var", str(var)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        http = httpx.Client(base_url=base, timeout=30, trust_env=False)
        try:
            # Until up has met the missing database at least once (a fixed pause was too
            # short on a loaded machine, where up takes longer to try its shim first).
            wait_until(
                lambda: "the shim did not start" in log.read_text() or up.poll() is not None,
                90,
                "gatehouse up to try its shim against the stopped database",
            )
            assert up.poll() is None, log.read_text()
            say("starting PostgreSQL under a waiting gatehouse up")
            pg.start()
            wait_until(lambda: _workers_ready(var, 2), 90, "both workers to start")
            wait_until((var / "local-tokens.txt").exists, 90, "the local identities")
            people = dict(
                line.split() for line in (var / "local-tokens.txt").read_text().splitlines()
            )
            submitter = {"Authorization": f"Bearer {people['local-submitter']}"}
            approver = {"Authorization": f"Bearer {people['local-approver']}"}

            def healthy() -> bool:
                try:
                    return http.get("/healthz").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(healthy, 90, "the shim to answer")

            def run_once(tag: str) -> str:
                planned = make_plan(tag, sink.base_url, [Channel.NOTE, Channel.KEYED])
                body = {
                    "recipe": "echo",
                    "objective": tag,
                    "mode": "run-plan",
                    "plan": planned.plan,
                }
                r = http.post("/intent", json=body, headers={**submitter, "Idempotency-Key": tag})
                assert r.status_code == 202, r.text
                run_id = str(r.json()["run_id"])
                r = http.post(
                    f"/approve/{run_id}", json={"plan_digest": planned.digest}, headers=approver
                )
                assert r.status_code == 200, r.text
                return run_id

            def status(run_id: str) -> str:
                r = http.get(f"/runs/{run_id}", headers=submitter)
                return str(r.json()["status"]) if r.status_code == 200 else f"http {r.status_code}"

            first = run_once("up-1")
            wait_until(lambda: status(first) == "succeeded", 90, "the first run")

            second = run_once("up-2")
            say("PostgreSQL crash-restart with a worker killed while it is away")
            pg.stop("immediate")
            os.kill(_pids(log)["worker-1"], signal.SIGKILL)
            assert http.get("/runs", headers=submitter).status_code == 503
            time.sleep(3)
            pg.start()
            wait_until(lambda: status(second) == "succeeded", 120, "the run across the restart")
            assert sink.applications("up-1.keyed") == 1
            assert sink.applications("up-2.keyed") == 1
            text = log.read_text()
            assert "restarting" in text, text
            assert "the shim did not start" in text, text  # it was tried again, not given up
        finally:
            http.close()
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            finally:
                if up.poll() is None:
                    up.kill()
