"""What each mise task installs: the demo gets Gatehouse without OpenCode (~350 MB it
never uses) and without the dev and test tools; every task that runs OpenCode installs
the pinned build first."""

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


def _spec_for(*args: str) -> str:
    """What scripts/setup.sh hands pip for ``args``: its mode switch, run alone."""
    script = (ROOT / "scripts" / "setup.sh").read_text("utf-8")
    start = script.index('case "${1:-}" in')
    switch = script[start : script.index("esac", start) + len("esac")]
    probe = f'{switch}\necho "$mode $spec"\n'
    argv = ["bash", "-c", probe, "setup", *args]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_demo_installs_no_test_tools() -> None:
    """The product alone for the demo and `up`; the dev extra (pytest, Schemathesis,
    Playwright...) and the test-only faketime package only for the tasks that test."""
    tasks = _tasks()
    assert _spec_for() == "product ."
    assert _spec_for("dev") == "dev .[dev]"
    assert _spec_for("opencode") == "dev .[dev]"
    assert tasks["setup:dev"]["run"] == "bash scripts/setup.sh dev"
    for name in ("demo", "up", "db:readonly-role"):
        assert "setup:dev" not in tasks[name]["depends"], name
        assert "setup:faketime" not in tasks[name]["depends"], name
    testing = [n for n in tasks if n.startswith(("test:", "chaos:", "policy", "bench"))]
    for name in [*testing, "lint", "typecheck", "soak"]:
        run = tasks[name].get("run")
        if isinstance(run, list) and all(isinstance(part, dict) for part in run):
            continue  # a sequence of other tasks (test:fast): theirs count
        deps = tasks[name].get("depends", [])
        assert {"setup:dev", "setup:opencode"} & set(deps), name
    for name in ("test:integration", "test:chaos", "chaos:clock"):
        assert "setup:faketime" in tasks[name]["depends"], name


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
