"""The README's tutorial, run command by command: what it shows is what Gatehouse prints.

The ``console`` blocks of "Your first run" are read from README.md itself: a
``$`` line is typed into bash, the lines under it are the output it must print.
The first block is the first terminal (the scripted model in the background,
then ``gatehouse up``), the others the second terminal. Changed, and only
these: the folder is a fresh one holding what a clone has that the tutorial
touches (``.venv``, ``dbos-config.yaml``, the model script), the ports are free
ones in place of 8000 and 8091, and RUN_ID and PLAN_DIGEST are filled in as a
person would, from the output above them. The second terminal is not told the
free port: its commands find the stack as a person's would (``var/stack.json``).

Matching: blank lines, runs of spaces and the length of a table's rule do not
count (tables pad their columns to the values in them); a ``<name>`` in the
shown output stands for what changes from run to run, and the same name means
the same value everywhere (a run id, a digest), except the free ones (times,
pids, durations, op_key prefixes).
Standard output must match line by line. A ``--wait``'s status lines (standard
error) depend on when the run was looked at, so each one printed must be one
the README shows, not all of them. ``[1] <pid>``, the job line an interactive
shell prints for ``&``, is not printed by a script and is skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from shim.local import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
MODEL_SCRIPT = "docs/tutorials/first-run-model.json"
COLUMNS = "120"  # the width the README's tables are shown at

_HEX64 = "[0-9a-f]{64}"
_KINDS = {  # placeholder -> what it stands for; the free ones are not bound to one value
    "run-id": "run_[0-9a-f]{32}",
    "time": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
    "pid": r"\d+",
    "ms": r"\d+",
    "op-key": "[0-9a-f]{16}…",
    "seconds": r"[0-9][0-9,]*\.[0-9]",  # a budget's time used, to a tenth
}
_FREE = {"time", "pid", "ms", "op-key", "seconds"}
_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")
_COMMAND_WORDS = {"RUN_ID": "run-id", "PLAN_DIGEST": "plan-digest"}


@dataclass
class Step:
    command: str
    output: list[str] = field(default_factory=list)


def tutorial() -> list[list[Step]]:
    """The tutorial's console blocks, each a list of commands with their shown output."""
    text = (ROOT / "README.md").read_text("utf-8")
    start = text.index("## Your first run")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.DOTALL):
        steps: list[Step] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:]))
            else:
                assert steps, f"output before any command: {line!r}"
                steps[-1].output.append(line)
        blocks.append(steps)
    assert len(blocks) >= 5, "the tutorial's console blocks were not found"
    return blocks


def _normal(line: str) -> str:
    """Spacing and a table rule's length follow the columns' widths, which follow the
    values (a 2-digit or a 3-digit duration): neither counts."""
    return re.sub(r"\s+", " ", re.sub("─+", "─", line)).strip()


def _pattern(template: str, bound: dict[str, str]) -> re.Pattern[str]:
    parts, groups, at = [], set[str](), 0
    for m in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[at : m.start()]))
        name, group = m.group(1), m.group(1).replace("-", "_")
        if name in _FREE:
            parts.append(f"(?:{_KINDS[name]})")
        elif name in bound:
            parts.append(re.escape(bound[name]))
        elif group in groups:
            parts.append(f"(?P={group})")
        else:
            groups.add(group)
            parts.append(f"(?P<{group}>{_KINDS.get(name, _HEX64)})")
        at = m.end()
    parts.append(re.escape(template[at:]))
    return re.compile("".join(parts))


def _match(template: str, line: str, bound: dict[str, str]) -> bool:
    m = _pattern(_normal(template), bound).fullmatch(_normal(line))
    if m is None:
        return False
    bound.update({k.replace("_", "-"): v for k, v in m.groupdict().items()})
    return True


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def check_output(
    shown: list[str], stdout: str, stderr: str, bound: dict[str, str], what: str
) -> None:
    """Hold a command's output to what the README shows under it (see the module doc)."""
    expected = [ln for ln in shown if ln.strip() and not re.fullmatch(r"\[\d+\] <pid>", ln)]
    out, err = _lines(stdout), _lines(stderr)
    if not out:  # everything it says goes to stderr: that is its output
        out, err = err, []
    printed = "\n".join([*err, *out])
    assert len(expected) >= len(out), f"{what}: printed more than the README shows:\n{printed}"
    head, tail = expected[: len(expected) - len(out)], expected[len(expected) - len(out) :]
    for template, line in zip(tail, out, strict=True):
        assert _match(template, line, bound), (
            f"{what}: the README shows\n  {template}\nbut it printed\n  {line}\n"
            f"whole output:\n{printed}"
        )
    for line in err:
        assert any(_match(t, line, bound) for t in head), (
            f"{what}: printed a line the README does not show:\n  {line}\nwhole output:\n{printed}"
        )


def test_the_matching_can_fail() -> None:
    bound: dict[str, str] = {}
    assert _match(
        "run <run-id>  at <time>", f"run   run_{'a' * 32} at 2026-01-01T00:00:00.000Z", bound
    )
    assert bound == {"run-id": f"run_{'a' * 32}"}
    assert not _match("run <run-id>", f"run run_{'b' * 32}", bound)  # bound to the first
    assert not _match("digest <plan-digest>", "digest 1234", bound)
    assert _match("<plan-digest> <plan-digest>", f"{'c' * 64} {'c' * 64}", bound)
    assert not _match("<x-digest> <x-digest>", f"{'c' * 64} {'d' * 64}", {})
    check_output(["a", "b <ms>"], "a\nb 12\n", "", {}, "ok")
    with pytest.raises(AssertionError):
        check_output(["a"], "a\nb\n", "", {}, "printed more")
    with pytest.raises(AssertionError):
        check_output(["x: 1", "y: 2", "a"], "a\n", "z: 3\n", {}, "an unshown status line")


class Terminal:
    """One shell's environment, carried from command to command like a person's."""

    def __init__(self, cwd: Path, env: dict[str, str], ports: dict[str, str]) -> None:
        self.cwd, self.env, self.ports = cwd, env, ports

    def line(self, command: str, bound: dict[str, str]) -> str:
        for word, name in _COMMAND_WORDS.items():
            if word in command:
                assert name in bound, f"{command}: no {name} printed above it"
                command = command.replace(word, bound[name])
        for shown, free in self.ports.items():
            command = command.replace(shown, free)
        return command

    def export(self, command: str) -> None:
        done = subprocess.run(
            ["bash", "-c", f"{command}\nenv -0"],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            check=True,
        )
        pairs = (item.split(b"=", 1) for item in done.stdout.split(b"\0") if b"=" in item)
        self.env = {k.decode(): v.decode() for k, v in pairs}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (
            f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        )
        return done

    def start(self, command: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(
                ["bash", "-c", f"exec {command.removesuffix('&').strip()}"],
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )


def _wait_for(
    what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path
) -> None:
    """Wait, without a bound of its own (the test's timeout is the bound), for ``ready``."""
    while not ready():
        assert proc.poll() is None, f"{what} exited {proc.returncode}:\n{log.read_text()}"
        time.sleep(0.2)


def _shown(output: str, ports: dict[str, str]) -> str:
    """The output with the free ports written as the README's."""
    for shown, free in ports.items():
        output = output.replace(f"127.0.0.1:{free}", f"127.0.0.1:{shown}")
    return output


def _has_lines(log: Path, n: int) -> Callable[[], bool]:
    return lambda: len(_lines(log.read_text())) >= n


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_tutorial_prints_what_the_readme_shows(tmp_path: Path) -> None:
    first, *second = tutorial()
    clone = tmp_path / "clone"
    (clone / "docs" / "tutorials").mkdir(parents=True)
    (clone / ".venv").symlink_to(VENV)
    shutil.copy(ROOT / "dbos-config.yaml", clone / "dbos-config.yaml")
    shutil.copy(ROOT / MODEL_SCRIPT, clone / MODEL_SCRIPT)
    ports = {"8000": str(free_port()), "8091": str(free_port())}
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    # PYTHONUNBUFFERED: the background model's line shows at once, as on a terminal
    env |= {"COLUMNS": COLUMNS, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    bound: dict[str, str] = {}
    url = f"http://127.0.0.1:{ports['8000']}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        # the first terminal: the scripted model in the background, then the stack
        one = Terminal(clone, env, ports)
        for n, step in enumerate(first):
            command = one.line(step.command, bound)
            if command.startswith("export "):
                one.export(command)
                continue
            log = tmp_path / f"terminal-1-{n}.log"
            if re.search(r"gatehouse up\b", command):
                command += f" --port {ports['8000']}"
                proc = one.start(command, log)
                started.append(proc)
                _wait_for("gatehouse up", lambda: _ready(url), proc, log)
            else:
                assert command.endswith("&"), f"the first terminal runs {command!r} how?"
                proc = one.start(command, log)
                started.append(proc)
                shown = [ln for ln in step.output if not ln.startswith("[")]
                _wait_for(command, _has_lines(log, len(shown)), proc, log)
            check_output(step.output, _shown(log.read_text(), ports), "", bound, step.command)
        assert started, "the first terminal starts the stack"

        # the second terminal, in the same folder
        # nothing says where the stack is: the commands find it (var/stack.json), on a
        # port that is not the default
        two = Terminal(clone, dict(env), ports)
        for block in second:
            for step in block:
                command = two.line(step.command, bound)
                if command.startswith("export "):
                    two.export(command)
                    assert not step.output, f"{command} prints nothing"
                    continue
                done = two.run(command)
                out, err = _shown(done.stdout, ports), _shown(done.stderr, ports)
                check_output(step.output, out, err, bound, step.command)
        assert {"run-id", "plan-digest"} <= set(bound)
    finally:
        for proc in reversed(started):
            _stop(proc)
