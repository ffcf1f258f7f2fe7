"""docs/tutorials/own-tool.md, executed: its commands in order, checked against the output it shows.

The tutorial marks what this test runs with HTML comments (invisible on GitHub),
each on the line before a fenced block:

* ``<!-- tutorial: file PATH -->``: the block is the whole content of ``PATH``
  (the server, the pool, the profile, the plan), so the files the reader sees are
  the files that run;
* ``<!-- tutorial: pinned PATH -->``: the block is one tool's pin as the pool
  file ``PATH`` of the reader's copy holds it at that point (digest included);
* ``<!-- tutorial: stack -->``: the first terminal, the block that starts
  ``gatehouse up`` (it runs in the background from then on);
  ``<!-- tutorial: restart -->``: Ctrl-C there, then that block again;
* ``<!-- tutorial: shell -->`` (or ``shell exit=N``): lines typed in the second
  terminal, one bash process for the whole tutorial, so variables carry over;
  every line must exit 0, the block's last one N when given;
* ``<!-- tutorial: output -->``: what the block before it prints (a stack block:
  until the stack is ready, its port shown as 8000). Its lines
  must appear in that order in what was printed (stdout and stderr, as a terminal
  shows them); a line ``…`` stands for lines left out and ``…`` inside a line for
  any text; run ids, hex digests, times and pids may differ.

Changed, and only these: the database is a fresh PostgreSQL database, the port is
a free one (``--port`` on ``gatehouse up``, and ``GATEHOUSE_URL`` in the second
terminal), the folder is a fresh one holding only ``.venv`` and ``docs`` (as a
clone after setup), and ``RUN_ID`` is the run id the last command printed. The
whole transcript is written to ``transcript.txt`` in the test's folder.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from shim.local import free_port
from worker.sandbox.bwrap import current as current_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorials" / "own-tool.md"
VENV = Path(sys.executable).parent.parent
COLUMNS = "100"  # the width the tutorial's tables were printed at
MARKER = re.compile(r"^<!-- tutorial: (\w+)(?: (.+?))? -->$")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN_ID = re.compile(r"run_[0-9a-f]{32}")


@dataclass(frozen=True)
class Block:
    kind: str  # file, pinned, stack, restart, shell, output
    arg: str  # file, pinned: the path; shell: "exit=N" or ""
    text: str
    line: int  # where it is in the tutorial, for messages


def blocks() -> list[Block]:
    """The marked blocks of the tutorial, in order."""
    text = TUTORIAL.read_text("utf-8")
    out: list[Block] = []
    for fence in FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found = MARKER.match(before.strip())
        if found:
            line = text.count("\n", 0, fence.start()) + 1
            out.append(Block(found[1], found[2] or "", fence[2], line))
    return out


def commands(block: Block) -> list[str]:
    lines = [ln for ln in block.text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert not [ln for ln in lines if ln.endswith("\\")], f"line {block.line}: one line each"
    return lines


def normalized(line: str) -> str:
    line = RUN_ID.sub("run_<id>", line)
    line = re.sub(r"\b[0-9a-f]{12,64}\b…?", "<hex>", line)
    line = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", line)
    line = re.sub(r"\bpid \d+", "pid <n>", line)
    return " ".join(line.split())


def shows(expected: str, printed: str) -> str | None:
    """None when ``printed`` shows every line of ``expected`` in order, else the first
    expected line it does not show."""
    lines = [normalized(ln) for ln in printed.splitlines()]
    at = 0
    for raw in expected.splitlines():
        want = normalized(raw)
        if not want or want == "…":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("…")))
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return raw
        at += 1
    return None


class Shell:
    """The second terminal: one bash reading lines as a person types them."""

    def __init__(self, cwd: Path, env: dict[str, str], transcript: IO[str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.transcript = transcript
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def run(self, line: str) -> tuple[int, str]:
        """Run one line (its stdin is /dev/null); its exit code and what it printed."""
        assert self.proc.stdin is not None
        mark = f"__tutorial_{uuid.uuid4().hex}__"
        self.proc.stdin.write(f"{{ {line}\n}} </dev/null\nprintf '%s %s\\n' {mark} $?\n")
        self.proc.stdin.flush()
        printed: list[str] = []
        while True:
            # a bound for a command that hangs, not a measurement
            got = self.lines.get(timeout=300)
            if mark in got:
                head, _, code = got.partition(mark)
                printed.append(head)
                break
            printed.append(got)
        out = "".join(printed)
        self.transcript.write(f"$ {line}\n{out}[exit {int(code)}]\n\n")
        self.transcript.flush()
        return int(code), out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


class Stack:
    """The first terminal: the stack block running in the background."""

    def __init__(self, block: Block, cwd: Path, env: dict[str, str], pg_url: str) -> None:
        self.port = free_port()
        self.cwd, self.env, self.log = cwd, env, cwd.parent / "stack.log"
        script: list[str] = []
        for line in commands(block):
            if line.startswith("export GATEHOUSE_DATABASE_URL="):
                script.append(f"export GATEHOUSE_DATABASE_URL={pg_url}")
            elif line.endswith("gatehouse up"):
                script.append(f"exec {line} --port {self.port}")
            else:
                script.append(line)
        assert script[-1].startswith("exec "), f"line {block.line}: the block starts the stack"
        self.script = "\n".join(script)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the block; once the stack is ready, what it printed (as on port 8000)."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", self.script],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # as a person waits for the first terminal to say the worker is up
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).json().get("status") == "ready":
                    printed = self.log.read_bytes()[offset:].decode()
                    return printed.replace(f":{self.port}", ":8000")
            except (httpx.HTTPError, ValueError):
                pass
            assert time.monotonic() < deadline, f"not ready: {self.log.read_text()}"
            time.sleep(0.5)

    def stop(self) -> None:
        """Ctrl-C in the first terminal: SIGINT to its foreground process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def test_the_own_tool_tutorial_runs_as_written(pg_url: str, tmp_path: Path) -> None:
    marked = blocks()
    kinds = [b.kind for b in marked]
    assert {"file", "pinned", "stack", "restart", "shell", "output"} <= set(kinds), kinds
    for block in marked:
        if block.kind == "file":
            shipped = (ROOT / block.arg).read_text("utf-8")
            assert block.text == shipped, f"line {block.line}: not the content of {block.arg}"

    assert not isinstance(current_sandbox(), str), "the tutorial's server runs in the sandbox"
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV)
    (clone / "docs").symlink_to(ROOT / "docs")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    base["COLUMNS"] = COLUMNS
    stack: Stack | None = None
    with (tmp_path / "transcript.txt").open("w", encoding="utf-8") as transcript:
        shell = Shell(clone, base, transcript)
        try:
            run_id = ""
            printed = ""
            for block in marked:
                if block.kind == "stack":
                    stack = Stack(block, clone, base, pg_url)
                    printed = stack.start()
                    shell.run(f"export GATEHOUSE_URL={stack.url}")
                elif block.kind == "restart":
                    assert stack is not None, f"line {block.line}: no stack to restart"
                    stack.stop()
                    printed = stack.start()
                elif block.kind == "shell":
                    want = int(block.arg.removeprefix("exit=")) if block.arg else 0
                    lines = commands(block)
                    printed = ""
                    for n, typed in enumerate(lines, 1):
                        assert run_id or "RUN_ID" not in typed, f"line {block.line}: no run id"
                        line = typed.replace("RUN_ID", run_id)
                        code, out = shell.run(line)
                        expected = want if n == len(lines) else 0
                        assert code == expected, f"line {block.line}: {line}: exit {code}\n{out}"
                        printed += out
                        found = RUN_ID.findall(out)
                        run_id = found[0] if found else run_id
                elif block.kind == "pinned":
                    shown = json.loads(block.text)
                    pool = json.loads((clone / block.arg).read_text("utf-8"))
                    pins = [t for c in pool["connectors"] for t in c["mcp"]["tools"]]
                    assert shown in pins, f"line {block.line}: not a pin of {block.arg}: {pins}"
                elif block.kind == "output":
                    missing = shows(block.text, printed)
                    assert missing is None, (
                        f"line {block.line}: the tutorial shows {missing!r}, not printed:\n"
                        + printed
                    )
        finally:
            shell.close()
            if stack is not None:
                stack.stop()
