"""What each mise task installs: the demo gets Gatehouse without OpenCode (~350 MB it
never uses); every task that runs OpenCode installs the pinned build first."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Tasks whose tests or measurements start a real `opencode serve`.
NEEDS_OPENCODE = ("test:integration", "test:e2e", "oc:daemon:contract", "test:chaos", "bench")


def _tasks() -> dict[str, Any]:
    tasks: dict[str, Any] = tomllib.loads((ROOT / "mise.toml").read_text("utf-8"))["tasks"]
    return tasks


def test_the_demo_installs_no_opencode() -> None:
    tasks = _tasks()
    # the demo's shell steps run in the sandbox: it installs bubblewrap, never OpenCode
    assert tasks["demo"]["depends"] == ["setup", "setup:sandbox"]
    assert tasks["setup"]["run"] == "bash scripts/setup.sh"
    assert tasks["setup:opencode"]["run"] == "bash scripts/setup.sh opencode"


def test_the_tasks_that_run_opencode_install_it() -> None:
    tasks = _tasks()
    for name in NEEDS_OPENCODE:
        assert tasks[name]["depends"][0] == "setup:opencode", name
    # the browser test's Chromium comes with the end-to-end tests, and only there
    assert tasks["test:e2e"]["depends"] == ["setup:opencode", "setup:sandbox", "setup:browser"]


def test_setup_stops_before_opencode_unless_asked() -> None:
    """Run the script's OpenCode gate alone: without the argument it ends there."""
    script = (ROOT / "scripts" / "setup.sh").read_text("utf-8")
    gate = next(line for line in script.splitlines() if "opencode" in line and "exit 0" in line)
    probe = f'set -e\n{gate}\necho "would install OpenCode"\n'
    plain = subprocess.run(
        ["bash", "-c", probe, "setup"], capture_output=True, text=True, check=False
    )
    asked = subprocess.run(
        ["bash", "-c", probe, "setup", "opencode"], capture_output=True, text=True, check=False
    )
    assert (plain.returncode, plain.stdout) == (0, "")
    assert asked.stdout == "would install OpenCode\n"
    # and the gate comes before anything npm does
    assert script.index(gate) < script.index("npm install")


def test_mise_runs_without_being_trusted_first() -> None:
    """mise refuses an untrusted mise.toml that sets variables or tools: a new user's
    `npx -y @jdxcode/mise run demo` in a fresh clone would stop at `mise trust`."""
    config = tomllib.loads((ROOT / "mise.toml").read_text("utf-8"))
    assert set(config) == {"tasks"}, sorted(config)
