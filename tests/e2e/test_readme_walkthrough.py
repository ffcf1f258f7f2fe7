"""docs/cli.md's "Running it for real", line by line, ends with a succeeded run.

The two shell blocks are read from docs/cli.md itself, so the test breaks when
they do. Changed, and only these: the database is a fresh PostgreSQL database,
the port is a free one, ``npx -y @jdxcode/mise run up`` is the ``.venv/bin/
gatehouse up`` that task runs, and the ``<…token…>`` placeholders and RUN_ID
are filled in as a person would (from var/local-tokens.txt and `runs`). The
folder is a fresh one with only ``.venv`` in it, as in a clone after setup.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shim.local import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent


def _blocks() -> tuple[list[str], list[str]]:
    text = (ROOT / "docs" / "cli.md").read_text("utf-8")
    start = text.index("## Running it for real")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) >= 2, "the walkthrough has a first and a second terminal"

    def lines(block: str) -> list[str]:
        return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]

    return lines(blocks[0]), lines(blocks[1])


def test_the_walkthrough_ends_with_a_succeeded_run(pg_url: str, tmp_path: Path) -> None:
    first, second = _blocks()
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}

    # terminal 1
    up_argv: list[str] = []
    for line in first:
        if line.startswith("export GATEHOUSE_DATABASE_URL="):
            env["GATEHOUSE_DATABASE_URL"] = pg_url
        elif "mise run up" in line:
            up_argv = [".venv/bin/gatehouse", "up", "--port", str(port)]
        else:
            raise AssertionError(f"the first block has a line this test does not know: {line}")
    assert up_argv, "the first block starts the stack"
    with (tmp_path / "up.log").open("wb") as log:
        up = subprocess.Popen(up_argv, cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _second_terminal(second, clone, env, port, tmp_path / "up.log")
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()


def _second_terminal(
    lines: list[str], clone: Path, env: dict[str, str], port: int, log: Path
) -> None:
    env = {**env, "GATEHOUSE_URL": f"http://127.0.0.1:{port}", "COLUMNS": "250"}
    tokens_file = clone / "var" / "local-tokens.txt"
    run_id = ""
    last = ""

    def sh(line: str, wait_for: str | None = None) -> str:
        """Run one line as a person would type it; with ``wait_for``, again until it shows."""
        deadline = time.monotonic() + 90
        while True:
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if wait_for is None or wait_for in done.stdout:
                break
            assert time.monotonic() < deadline, f"{line}: no {wait_for!r}: {log.read_text()}"
            time.sleep(0.5)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def tokens() -> dict[str, str]:
        return dict(ln.split() for ln in tokens_file.read_text().splitlines())

    for raw in lines:
        line = raw.split("  #")[0].strip().replace(":8000", f":{port}")
        if "<local-submitter token" in line:
            line = re.sub(r"<local-submitter token[^>]*>", tokens()["local-submitter"], line)
        if "<local-approver token>" in line:
            line = line.replace("<local-approver token>", tokens()["local-approver"])
        if "RUN_ID" in line:
            assert run_id, f"{raw}: no run id seen yet"
            line = line.replace("RUN_ID", run_id)
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = shlex.split(value)[0]
            continue
        if "/readyz" in line:
            last = sh(line, wait_for='"status":"ready"')
            continue
        if " approve " in line:
            # a person reads the plan card first: it is there once the run waits
            sh(f".venv/bin/gatehouse show {run_id}", wait_for="waiting_approval")
        last = sh(line)
        found = re.findall(r"run_[0-9a-f]{32}", last)
        if found and not run_id:
            run_id = found[0]
    assert run_id
    final = sh(f".venv/bin/gatehouse show {run_id}", wait_for="succeeded")
    assert "approved by local-approver" in final
    assert "succeeded" in last or "succeeded" in final
