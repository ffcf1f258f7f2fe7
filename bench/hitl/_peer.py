"""A peer system in a child process, asked over JSON lines on a pipe.

Parent: ``Peer(module, url)``, then ``ask(op=...)``. Child: ``serve(system)``
answers ``seq`` (n runs one after another: ms each), ``flight`` (n runs at
once: runs/s), ``counts`` (the system's SQL counters), ``phases`` (where its
sequential runs' time went) and ``quit``. The
protocol has its own file descriptor; whatever the library prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TextIO

__all__ = ["Peer", "PeerSystem", "serve"]


class PeerSystem(Protocol):
    def one_run(self, variant: str) -> None: ...

    def counts(self) -> dict[str, int]: ...

    def phases(self, variant: str, since_ms: float) -> dict[str, list[float]]: ...

    def close(self) -> None: ...


class Peer:
    def __init__(self, module: str, url: str, log: Path, *args: str) -> None:
        """The peer ``module`` started on database ``url``, given ``args`` after it."""
        self.name, self.url = module.rsplit(".", 1)[-1], url
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, url, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.log = log
        self.ask(op="ping")

    def ask(self, **message: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"peer {self.name} exited ({self.proc.poll()}): {tail}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"peer {self.name}: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, OSError):
                self.ask(op="quit")
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _answer(system: PeerSystem, msg: dict[str, Any]) -> dict[str, Any]:
    op, variant = msg["op"], str(msg.get("variant", ""))
    if op == "ping":
        return {"ok": True}
    if op == "counts":
        return {"counts": system.counts()}
    if op == "phases":
        return {"phases": system.phases(variant, float(msg["since"]))}
    if op == "seq":
        out = []
        for _ in range(int(msg["n"])):
            started = time.perf_counter()
            system.one_run(variant)
            out.append((time.perf_counter() - started) * 1000)
        return {"ms": out}
    if op == "flight":
        n = int(msg["n"])
        started = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda _: system.one_run(variant), range(n)))
        return {"runs_per_s": n / (time.perf_counter() - started)}
    raise ValueError(f"unknown op {op!r}")


def serve(system: PeerSystem) -> None:
    proto: TextIO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        for line in sys.stdin:
            msg = json.loads(line)
            if msg["op"] == "quit":
                proto.write("{}\n")
                proto.flush()
                return
            try:
                answer = _answer(system, msg)
            except Exception as exc:  # noqa: BLE001 - the parent reports it and stops
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            proto.write(json.dumps(answer) + "\n")
            proto.flush()
    finally:
        system.close()
