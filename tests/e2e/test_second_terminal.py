"""A second terminal finds the stack ``gatehouse up`` runs from the same folder: with no
``GATEHOUSE_*`` variable set, ``gatehouse sql`` reads the database up was given and the
client commands reach the port it serves (``var/stack.json``, while it runs). A Ctrl-C
stops it cleanly (no worker restarted on the way out); then nothing is found, and a
read-only command still creates no database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from shim.local import free_port
from tests.e2e.test_cli_edges import GATEHOUSE, _run
from tests.support.plans import noop_plan


def _wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{path} never appeared: {log.read_text()}"
        time.sleep(0.2)


def test_a_second_terminal_finds_the_running_stack(tmp_path: Path) -> None:
    elsewhere = tmp_path / "data" / "mine.sqlite"
    elsewhere.parent.mkdir()
    port = free_port()
    log = tmp_path / "up.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    with log.open("wb") as out:
        up = subprocess.Popen(
            [GATEHOUSE, "up", "--database-url", f"sqlite:///{elsewhere}", "--port", str(port)],
            cwd=tmp_path, env=clean, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        stack_file = tmp_path / "var" / "stack.json"
        _wait_for(stack_file, up, log)
        assert stack_file.stat().st_mode & 0o777 == 0o600  # a URL may carry a password
        token = (tmp_path / "var" / "local-tokens.txt").read_text().split()[1]

        counted = _run("sql", "SELECT COUNT(*) AS runs FROM v_run_overview", cwd=tmp_path)
        assert counted.returncode == 0, counted.stdout + counted.stderr
        assert "runs" in counted.stdout
        # the DBOS CLI knows only dbos-config.yaml and the environment: given the URL
        shown = _run("database-url", cwd=tmp_path)
        assert shown.stdout.strip() == f"sqlite:///{elsewhere}", shown.stdout + shown.stderr
        assert "var/stack.json" in shown.stderr
        dbos_cli = str(Path(GATEHOUSE).with_name("dbos"))
        dbos = subprocess.run(
            [dbos_cli, "workflow", "list", "-s", shown.stdout.strip()],
            cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert dbos.returncode == 0, dbos.stdout + dbos.stderr
        listed = _run("runs", "--json", cwd=tmp_path, GATEHOUSE_TOKEN=token)
        assert listed.returncode == 0, listed.stdout + listed.stderr  # port found, not 8000
        assert '"runs"' in listed.stdout

        # a client still connected at the stop: the event stream of a waiting run
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(noop_plan(1)))
        submitted = _run(
            "submit", "--recipe", "echo", "--mode", "run-plan", "--plan", str(plan),
            "--objective", "held open", "--json", "--wait", "60",
            cwd=tmp_path, GATEHOUSE_TOKEN=token,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        run_id = json.loads(submitted.stdout)["run_id"]
        watching = subprocess.Popen(
            [GATEHOUSE, "runs", "watch", run_id],
            cwd=tmp_path, env={**clean, "GATEHOUSE_TOKEN": token},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        assert watching.stdout is not None
        assert run_id in watching.stdout.readline().decode()  # the stream is open
    finally:
        os.killpg(up.pid, signal.SIGINT)  # as Ctrl-C does: up and its workers together
        assert up.wait(timeout=60) == 0, log.read_text()
    watching.kill()
    watching.wait()
    said = log.read_text()
    # nothing killed for want of stopping, though a client held a stream open; and a
    # worker that stopped with up is not started again on the way out
    worker_log = tmp_path / "var" / "worker-1.log"
    told = said + (worker_log.read_text() if worker_log.exists() else "")
    assert "killed" not in told and "restarting" not in told, told
    assert not (tmp_path / "var" / "stack.json").exists()
    # up has stopped: nothing to find; the default database is not made by a reader
    after = _run("sql", "SELECT 1", cwd=tmp_path)
    assert after.returncode == 1, after.stdout + after.stderr
    assert "gatehouse.sqlite" in after.stderr
    assert not (tmp_path / "gatehouse.sqlite").exists()
