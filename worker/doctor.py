"""``gatehouse doctor``: can this machine run a worker, and with what?

``python -m worker.doctor [--json]`` (the CLI execs it: the shim never imports
worker code). Each check says yes or no and why, with the fix:

* sandbox  — bubblewrap found and really able to make its namespaces here (a
  program is run in it), and whether a pids cgroup caps processes;
* database — the URL this worker would use, where it came from, and that it answers;
* opencode — the pinned OpenCode installed (needed by opencode steps only);
* opencode-sandbox — whether ``opencode serve`` can run in its sandbox here (the
  server's layout and its network bridge are really started); without it opencode
  steps are refused unless the profile allows them unsandboxed;
* notifications, traces — what ``GATEHOUSE_NOTIFICATIONS`` and the telemetry
  settings say (a bad file is a failed check);
* anchors — where run checkpoints are appended, and whether they are signed
  (``GATEHOUSE_SIGNING_KEY``; unset: written unsigned).

Exit 0 when the sandbox and the database are usable, else 1.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from contracts import GatehouseError, JsonObject
from ledger import open_database, resolve_database_url, resolve_telemetry
from worker.handlers.opencode.pin import installed_pin
from worker.runtime import (
    anchor_file,
    evidence_key,
    notifications,
    notifications_file,
    opencode_dir,
)
from worker.sandbox import find_sandbox
from worker.sandbox.bwrap import BWRAP_ENV
from worker.sandbox.server import server_sandbox

__all__ = ["main", "report"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not a pass/fail matter (informational)
    detail: str

    def to_json(self) -> JsonObject:
        return {"check": self.name, "ok": self.ok, "detail": self.detail}


def _sandbox() -> Check:
    found = find_sandbox(os.environ.get(BWRAP_ENV))
    if isinstance(found, str):
        return Check(
            "sandbox", False, f"{found}; shell steps will be refused (sandbox_unavailable)"
        )
    pids = f"processes capped by a pids cgroup under {found.pids}" if found.pids else (
        "no writable pids cgroup: the process count is not capped (CPU, memory, file size"
        " and open files still are)"
    )  # fmt: skip
    return Check("sandbox", True, f"bubblewrap {found.version} at {found.bwrap}: user, mount,"
                 f" pid, ipc, uts, cgroup and network namespaces; {pids}")  # fmt: skip


def _database() -> Check:
    try:
        url, source = resolve_database_url()
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
            return Check("database", True, f"{url} (from {source}): made at the first start")
        db = open_database(url)
    except GatehouseError as exc:
        return Check("database", False, exc.message)
    try:
        db.ping()
    except sa.exc.SQLAlchemyError as exc:
        first = str(exc).strip().splitlines()[0][:200]
        return Check("database", False, f"{url} (from {source}) does not answer: {first}")
    finally:
        db.dispose()
    return Check("database", True, f"{url} (from {source}) answers")


def _opencode() -> Check:
    directory = opencode_dir(dict(os.environ))
    try:
        pin = installed_pin(directory)
    except GatehouseError as exc:
        return Check(
            "opencode",
            None,
            f"{exc.message}; only opencode steps and the opencode planner need it (refused"
            " without it)",
        )
    return Check("opencode", True, f"{pin.package} {pin.version} installed, as pinned")


def _opencode_sandbox() -> Check:
    found = server_sandbox()
    if isinstance(found, str):
        return Check("opencode-sandbox", False, f"{found}; opencode steps and the opencode"
                     " planner will be refused (sandbox_unavailable) unless the profile says"
                     " unsandboxed_opencode: allowed")  # fmt: skip
    return Check("opencode-sandbox", True, f"opencode serve runs in bubblewrap {found.version}:"
                 " it writes only its own HOME and the workspace root; its network reaches the"
                 " model provider only, through a bridge")  # fmt: skip


def _notifications() -> Check:
    env = dict(os.environ)
    try:
        config = notifications(env)
    except GatehouseError as exc:
        return Check("notifications", False, exc.message)
    if config is None:
        return Check("notifications", None, "GATEHOUSE_NOTIFICATIONS unset: nobody is told")
    kinds = ", ".join(f"{s.id} ({s.kind})" for s in config.sinks)
    return Check("notifications", True, f"{notifications_file(env)}: {kinds}")


def _traces() -> Check:
    try:
        t = resolve_telemetry()
    except GatehouseError as exc:
        return Check("traces", False, exc.message)
    if not t.enabled:
        return Check("traces", None, "off (name an OTLP endpoint to switch them on)")
    where = ", ".join(t.traces_endpoints) or "the process's own tracer provider"
    return Check("traces", True, f"on, exported to {where}")


def _anchors() -> Check:
    env = dict(os.environ)
    where = anchor_file(env)
    try:
        key = evidence_key(env)
    except GatehouseError as exc:
        return Check("anchors", False, exc.message)
    if key is None:
        return Check(
            "anchors", None, f"{where}; GATEHOUSE_SIGNING_KEY unset: checkpoints are written"
            " UNSIGNED (gatehouse evidence keygen makes a key)",
        )  # fmt: skip
    return Check("anchors", True, f"{where}; checkpoints signed by key id {key.public.keyid}")


def report() -> list[Check]:
    return [
        _sandbox(),
        _database(),
        _opencode(),
        _opencode_sandbox(),
        _notifications(),
        _traces(),
        _anchors(),
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    checks = report()
    healthy = all(c.ok is not False for c in checks if c.name in ("sandbox", "database"))
    if "--json" in args:
        sys.stdout.write(
            json.dumps({"ok": healthy, "checks": [c.to_json() for c in checks]}, indent=2) + "\n"
        )
    else:
        table = Table(title="gatehouse doctor")
        for column in ("check", "", "detail"):
            table.add_column(column)
        for c in checks:
            mark = {True: "yes", False: "NO", None: "-"}[c.ok]
            table.add_row(c.name, mark, c.detail)
        Console(markup=False, emoji=False, highlight=False).print(table)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
