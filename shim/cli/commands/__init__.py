"""Every ``gatehouse`` command: one module each, in one literal registry.

A command module says what it is for (``HELP``, shown by --help and checked
against the README), declares its arguments (``add_arguments``) and does its
work (``run``: the exit code; a refusal or failure is raised, and ``main``
prints it). A command with actions (``tokens add|list|…``) picks the action
inside its own module. The order here is the order --help lists them in.
"""

from __future__ import annotations

import argparse
from typing import Protocol

from shim.cli.commands import (
    approve,
    artifacts,
    calls,
    cancel,
    demo,
    doctor,
    episodes,
    evidence,
    explain,
    ledger,
    mcp_pin,
    migrate,
    opa,
    policies,
    readonly_role,
    recipes,
    reject,
    replay,
    runs,
    security_events,
    show,
    sql,
    submit,
    tokens,
    up,
    workers,
)
from shim.cli.commands import shim as shim_command
from shim.cli.commands import worker as worker_command

__all__ = ["COMMANDS", "Command"]


class Command(Protocol):
    HELP: str

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: dict[str, Command] = {
    "demo": demo,
    "up": up,
    "shim": shim_command,
    "worker": worker_command,
    "doctor": doctor,
    "mcp-pin": mcp_pin,
    "migrate": migrate,
    "readonly-role": readonly_role,
    "submit": submit,
    "runs": runs,
    "show": show,
    "approve": approve,
    "reject": reject,
    "cancel": cancel,
    "ledger": ledger,
    "replay": replay,
    "calls": calls,
    "explain": explain,
    "workers": workers,
    "recipes": recipes,
    "policies": policies,
    "episodes": episodes,
    "artifacts": artifacts,
    "security-events": security_events,
    "tokens": tokens,
    "opa": opa,
    "evidence": evidence,
    "sql": sql,
}
