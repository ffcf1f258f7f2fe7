"""The demo's stack: a shim, a worker and a small inventory service on a fresh SQLite file.

``gatehouse demo`` walks one run through it. Everything is local: the shim and
the worker are separate processes, the inventory service listens on loopback,
and the demo makes its own two people (one submits, the other approves).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from contracts import Role
from shim.local._fixture import InventoryService
from shim.local._procs import free_port, start_shim, start_worker, stop, wait_healthy
from shim.local._up import stack_env
from shim.tokens import add_token

__all__ = ["DemoStack", "demo_stack"]


@dataclass(frozen=True)
class DemoStack:
    base_url: str
    submitter: str  # demo-submitter's token (submitter and operator)
    approver: str  # demo-approver's token (approver and operator)
    inventory: InventoryService
    db_file: Path


@contextmanager
def demo_stack(workdir: Path, say: Callable[[str], None]) -> Iterator[DemoStack]:
    """Wipe ``workdir``, start the stack in it and ``say`` what runs where; stop it after."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    db_file = workdir / "gatehouse.sqlite"
    url = f"sqlite:///{db_file}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    say("Gatehouse demo — embedded SQLite, no network beyond this machine")
    say(f"  database   {db_file}")
    # The demo makes its own two people: one submits, the other approves (four-eyes).
    tokens_file = workdir / "tokens.json"
    submitter = add_token(tokens_file, "demo-submitter", [Role.SUBMITTER, Role.OPERATOR])
    approver = add_token(tokens_file, "demo-approver", [Role.APPROVER, Role.OPERATOR])
    say(f"  tokens     {tokens_file} (digests only); for this demo:")
    say(f"             demo-submitter  {submitter}")
    say(f"             demo-approver   {approver}")
    procs = []
    with InventoryService() as inventory:
        try:
            say(f"  inventory  {inventory.base_url}/inventory.json (a local HTTP service)")
            # the anchor file and the trust store in the demo's folder, as up's in --var
            kept = stack_env(workdir)
            procs.append(start_shim(url, port, workdir / "shim.log", tokens_file, extra_env=kept))
            wait_healthy(base, procs[0])
            procs.append(
                start_worker(
                    url,
                    "demo-worker-1",
                    workdir / "workspaces",
                    workdir / "worker.log",
                    extra_env=kept,
                )
            )
            say(f"  shim       {base}   (logs in {workdir}/shim.log)")
            say(f"  worker     demo-worker-1 (pid {procs[1].pid}, logs in {workdir}/worker.log)")
            yield DemoStack(base, submitter, approver, inventory, db_file)
        finally:
            stop(procs)
