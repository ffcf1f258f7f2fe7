"""Every ``gatehouse`` command: one module each, named in one literal registry.

The registry holds each command's module *name* and its one line of help, so that
``gatehouse --help`` and ``--version`` import none of them: a command's module,
and what it needs (the database, the HTTP client, the contracts), is imported
only when that command is named (``load``). The order here is the order --help
lists them in.

A command module declares its arguments (``add_arguments``) and does its work
(``run``: the exit code; a refusal or failure is raised, and ``main`` prints
it). A command with actions (``tokens add|list|…``) picks the action inside its
own module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

# The product's one import by name: ``load`` imports only what the literal registry
# below names, modules of this package (tests/static holds it to that).
from importlib import import_module  # noqa: TID251
from typing import NamedTuple

__all__ = ["COMMANDS", "CommandInfo", "LoadedCommand", "load"]


class CommandInfo(NamedTuple):
    module: str  # imported only when the command runs
    HELP: str  # the line --help shows for it (and the docs' table of commands)


class LoadedCommand(NamedTuple):
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, CommandInfo] = {
    "demo": CommandInfo(
        "shim.cli.commands.demo",
        "run one real intent end to end on SQLite and explain each stage",
    ),
    "up": CommandInfo(
        "shim.cli.commands.up",
        "start the shim and workers as supervised processes",
    ),
    "shim": CommandInfo(
        "shim.cli.commands.shim",
        "run the HTTP API in the foreground",
    ),
    "worker": CommandInfo(
        "shim.cli.commands.worker",
        "run one worker in the foreground",
    ),
    "doctor": CommandInfo(
        "shim.cli.commands.doctor",
        "check what a worker here can do: the sandbox, the database, OpenCode, settings",
    ),
    "mcp-pin": CommandInfo(
        "shim.cli.commands.mcp_pin",
        "check an MCP tool pool's pins against its live servers (mcp-pin POOL.json),"
        " or fetch and write them (--write)",
    ),
    "migrate": CommandInfo(
        "shim.cli.commands.migrate",
        "create or upgrade the database schema",
    ),
    "database-url": CommandInfo(
        "shim.cli.commands.database_url",
        "print the database URL the client commands use here (for the DBOS CLI's -s)",
    ),
    "readonly-role": CommandInfo(
        "shim.cli.commands.readonly_role",
        "PostgreSQL: this database's login gatehouse_readonly_<db>, reading its views only",
    ),
    "submit": CommandInfo(
        "shim.cli.commands.submit",
        "submit an intent",
    ),
    "runs": CommandInfo(
        "shim.cli.commands.runs",
        "list runs, watch one live: runs watch RUN_ID, or fork one: runs fork RUN_ID",
    ),
    "show": CommandInfo(
        "shim.cli.commands.show",
        "show one run: its plan card, digest, steps and decisions",
    ),
    "approve": CommandInfo(
        "shim.cli.commands.approve",
        "approve a run's plan (by its digest)",
    ),
    "reject": CommandInfo(
        "shim.cli.commands.reject",
        "reject a run's plan (by its digest)",
    ),
    "cancel": CommandInfo(
        "shim.cli.commands.cancel",
        "cancel a run: a waiting run ends cancelled, a running one at its next step",
    ),
    "ledger": CommandInfo(
        "shim.cli.commands.ledger",
        "show a run's ledger (ledger show RUN_ID), or verify its hash chain and name"
        " the first broken entry (ledger verify RUN_ID)",
    ),
    "replay": CommandInfo(
        "shim.cli.commands.replay",
        "replay a finished run from its ledger (no outbound calls); compare trace digests",
    ),
    "calls": CommandInfo(
        "shim.cli.commands.calls",
        "resolve an in-doubt call: calls resolve OP_KEY --applied or --not-applied",
    ),
    "explain": CommandInfo(
        "shim.cli.commands.explain",
        "a model's report on a finished run, written from its evidence only",
    ),
    "workers": CommandInfo(
        "shim.cli.commands.workers",
        "list the workers with their heartbeat age, and which are live",
    ),
    "recipes": CommandInfo(
        "shim.cli.commands.recipes",
        "list the recipes one may submit, with their required parameters",
    ),
    "policies": CommandInfo(
        "shim.cli.commands.policies",
        "list the policy profiles and tool pools with their digests, or show one",
    ),
    "policy": CommandInfo(
        "shim.cli.commands.policy",
        "policies as code: policy test PATH… (policy tests as files, run through the gate),"
        " policy what-if PROFILE_OR_POLICY (every recorded plan under proposed rules),"
        " policy schema (the Cedar schema of the tool pools)",
    ),
    "episodes": CommandInfo(
        "shim.cli.commands.episodes",
        "list a run's MOVA episodes",
    ),
    "artifacts": CommandInfo(
        "shim.cli.commands.artifacts",
        "list a run's artifacts (artifacts list RUN_ID), or fetch one's bytes"
        " (artifacts get SHA256)",
    ),
    "security-events": CommandInfo(
        "shim.cli.commands.security_events",
        "list refused requests and refusals inside runs, newest first",
    ),
    "login": CommandInfo(
        "shim.cli.commands.login",
        "sign in with the company's identity provider from this terminal (device"
        " sign-in); prints export GATEHOUSE_TOKEN=… for a session with your groups' roles",
    ),
    "logout": CommandInfo(
        "shim.cli.commands.logout",
        "end the session gatehouse login opened (GATEHOUSE_TOKEN): the server forgets it,"
        " and the token is refused from then on",
    ),
    "tokens": CommandInfo(
        "shim.cli.commands.tokens",
        "bearer tokens: tokens add NAME --roles … (printed once; only its digest is"
        " stored), tokens list, tokens revoke ID, tokens rotate ID [--grace 1h]",
    ),
    "opa": CommandInfo(
        "shim.cli.commands.opa",
        "OPA archives: validate one without running it (opa inspect FILE), run one"
        " (opa run FILE), send an interactive run its next message (opa reply RUN_ID TEXT,"
        " or --end), download a run's output archive (opa output RUN_ID), and manage the"
        " signers' trust store (opa trust add|list|remove)",
    ),
    "evidence": CommandInfo(
        "shim.cli.commands.evidence",
        "a run's signed evidence bundle: evidence export RUN_ID -o FILE (from the"
        " database), evidence verify FILE --key PUB.pem (offline), evidence keygen -o KEY.pem",
    ),
    "sql": CommandInfo(
        "shim.cli.commands.sql",
        "run a read-only SQL query against the database",
    ),
}


def load(name: str) -> LoadedCommand:
    """The command ``name`` (a key of ``COMMANDS``), its module imported now."""
    module = import_module(COMMANDS[name].module)
    return LoadedCommand(add_arguments=module.add_arguments, run=module.run)
