"""The ``gatehouse`` command. Each subcommand parses, makes one call, prints.

Process commands (demo, up, shim, worker, migrate) start or set up
processes; sql and tokens work on this machine's files and database
(``shim._cli_local``), evidence too (``shim._cli_evidence``); the rest talk
to a running shim over HTTP (``--url`` or ``GATEHOUSE_URL``, default
http://127.0.0.1:8000; ``shim._cli_api``).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError, RunStatus
from ledger import CONFIG_FILE, DEFAULT_DATABASE_URL
from shim import __version__

__all__ = ["COMMANDS", "EXIT_CODES", "build_parser", "ca_option", "main"]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_DB = DEFAULT_DATABASE_URL

COMMANDS = {
    "demo": "run one real intent end to end on SQLite and explain each stage",
    "up": "start the shim and workers as supervised processes",
    "shim": "run the HTTP API in the foreground",
    "worker": "run one worker in the foreground",
    "doctor": "check what a worker here can do: the sandbox, the database, OpenCode, settings",
    "mcp-pin": "check an MCP tool pool's pins against its live servers (mcp-pin POOL.json),"
    " or fetch and write them (--write)",
    "migrate": "create or upgrade the database schema",
    "readonly-role": "PostgreSQL: make the role gatehouse_readonly, which may read the views only",
    "submit": "submit an intent",
    "runs": "list runs, watch one live: runs watch RUN_ID, or fork one: runs fork RUN_ID",
    "show": "show one run: its plan card, digest, steps and decisions",
    "approve": "approve a run's plan (by its digest)",
    "reject": "reject a run's plan (by its digest)",
    "cancel": "cancel a run: a waiting run ends cancelled, a running one at its next step",
    "sql": "run a read-only SQL query against the database",
    "tokens": "bearer tokens: tokens add NAME --roles … (printed once; only its digest is"
    " stored), tokens list, tokens revoke ID, tokens rotate ID [--grace 1h]",
    "ledger": "show a run's ledger (ledger show RUN_ID), or verify its hash chain and name"
    " the first broken entry (ledger verify RUN_ID)",
    "replay": "replay a finished run from its ledger (no outbound calls); compare trace digests",
    "calls": "resolve an in-doubt call: calls resolve OP_KEY --applied or --not-applied",
    "explain": "a model's report on a finished run, written from its evidence only",
    "workers": "list the workers with their heartbeat age, and which are live",
    "recipes": "list the recipes one may submit, with their required parameters",
    "policies": "list the policy profiles and tool pools with their digests, or show one",
    "episodes": "list a run's MOVA episodes",
    "artifacts": "list a run's artifacts (artifacts list RUN_ID), or fetch one's bytes"
    " (artifacts get SHA256)",
    "security-events": "list refused requests and refusals inside runs, newest first",
    "evidence": "a run's signed evidence bundle: evidence export RUN_ID -o FILE (from the"
    " database), evidence verify FILE --key PUB.pem (offline), evidence keygen -o KEY.pem",
    "opa": "OPA archives: validate one without running it (opa inspect FILE), run one"
    " (opa run FILE), send an interactive run its next message (opa reply RUN_ID TEXT, or"
    " --end), download a run's output archive (opa output RUN_ID), and manage the"
    " signers' trust store (opa trust add|list|remove)",
}
API_COMMANDS = (
    "submit",
    "runs",
    "show",
    "approve",
    "reject",
    "cancel",
    "ledger",
    "replay",
    "calls",
    "explain",
    "workers",
    "recipes",
    "policies",
    "episodes",
    "artifacts",
    "security-events",
)
EXIT_CODES = {
    0: "done",
    1: "refused or failed: the shim answered with an error (its code, message and details"
    " are printed), or the shim or the database could not be reached, or an evidence"
    " bundle does not verify (the first check that failed is printed)",
    2: "usage: a bad flag or argument, no token, a missing tokens file, an unreadable file",
    3: "a check failed: a replay diverged, or a ledger chain is broken",
    130: "interrupted (Ctrl-C)",
    141: "the output was closed early (a pipe into head); nothing is printed about it",
}
_EPILOG = "exit codes:\n" + "\n".join(
    textwrap.fill(v, 79, initial_indent=f"  {k:<4} ", subsequent_indent=" " * 7)
    for k, v in EXIT_CODES.items()
)
_WORKER_ENV = """\
A worker reads its settings from the environment (README, "Configuration"):
  GATEHOUSE_DATABASE_URL, GATEHOUSE_EXECUTOR_ID (stable, one per worker),
  GATEHOUSE_APP_VERSION, GATEHOUSE_WORKSPACE_ROOT, GATEHOUSE_WORKER_CONCURRENCY,
  GATEHOUSE_QUEUE_POLL_S, GATEHOUSE_HEARTBEAT_S, GATEHOUSE_DEAD_AFTER_S,
  GATEHOUSE_MODEL_BASE_URL, GATEHOUSE_MODEL_NAME, GATEHOUSE_MODEL_API_KEY,
  GATEHOUSE_OPENCODE_MODEL_URL, GATEHOUSE_OPENCODE_MODEL, GATEHOUSE_OPENCODE_DIR,
  GATEHOUSE_OPENCODE_STATE, GATEHOUSE_OPA_TRUST_DIR, GATEHOUSE_OPA_SIGNING_KEY,
  GATEHOUSE_OPA_SIGNING_CERT, RANDOM_SEED."""


def _version() -> str:
    return f"gatehouse {__version__} (application version {APP_VERSION})"


def _db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
        f" (default: GATEHOUSE_DATABASE_URL, else system_database_url in ./{CONFIG_FILE},"
        f" else {DEFAULT_DB})",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gatehouse",
        description="A durable control plane for AI agent runs.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, epilog: str = _EPILOG) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=COMMANDS[name],
            description=COMMANDS[name],
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    d = add("demo")
    d.add_argument(
        "--dir", default="var/demo", help="working folder, wiped first (default var/demo)"
    )
    d.add_argument(
        "--timeout", type=float, default=120, help="seconds to wait for each stage (default 120)"
    )
    u = add("up")
    _db_option(u)
    u.add_argument("--port", type=int, default=8000, help="the shim's port (default 8000)")
    u.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    u.add_argument("--var", default="var", help="folder for logs and workspaces (default var)")
    _tls_options(u)
    s = add("shim")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    _db_option(s)
    s.add_argument(
        "--tokens-file",
        default=os.environ.get("GATEHOUSE_TOKENS_FILE") or "var/tokens.json",
        help="the tokens file (default: GATEHOUSE_TOKENS_FILE, else var/tokens.json)",
    )
    _tls_options(s)
    add("worker", epilog=_WORKER_ENV + "\n\n" + _EPILOG)
    doctor = add("doctor", epilog="Exit 0 when the sandbox and the database are usable.")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    pin = add("mcp-pin", epilog="Exit 0 when every pin holds (or, with --write, was written).")
    pin.add_argument("pool", help="a tool pool JSON file with mcp_proxy connectors")
    pin.add_argument("--write", action="store_true", help="write the live definitions as pins")
    _db_option(add("migrate"))
    _db_option(
        add(
            "readonly-role",
            epilog="GATEHOUSE_READONLY_PASSWORD, when set, becomes the role's password.",
        )
    )
    for name in API_COMMANDS:
        _api_options(add(name))
    _api_arguments(sub.choices)
    from shim._tokens_cli import add_tokens_parser  # add, list, revoke, rotate: one block

    add_tokens_parser(add("tokens"))
    from shim._opa_cli import add_opa_parser  # the OPA archive commands: one block

    add_opa_parser(add("opa"))
    from shim._cli_evidence import add_evidence_parser

    add_evidence_parser(add("evidence"))
    q = add("sql")
    q.add_argument("query", help="one SELECT; it runs in a read-only transaction")
    _db_option(q)
    q.add_argument("--json", action="store_true", help="print the rows as JSON objects")
    return p


def _tls_options(p: argparse.ArgumentParser) -> None:
    where = f"else tls.{{}} in ./{CONFIG_FILE}; neither: plain HTTP"
    p.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="serve HTTPS with this PEM certificate (and chain); with --tls-key"
        f" (default: GATEHOUSE_TLS_CERT, {where.format('cert')})",
    )
    p.add_argument(
        "--tls-key",
        metavar="FILE",
        help="the certificate's PEM private key"
        f" (default: GATEHOUSE_TLS_KEY, {where.format('key')})",
    )


def _api_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=os.environ.get("GATEHOUSE_URL", DEFAULT_URL),
        help=f"the shim's base URL (default: GATEHOUSE_URL, else {DEFAULT_URL})",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("GATEHOUSE_TOKEN"),
        help="bearer token (default: GATEHOUSE_TOKEN)",
    )
    ca_option(p)
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")


def ca_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ca",
        metavar="FILE",
        default=os.environ.get("GATEHOUSE_CA") or None,
        help="trust the shim's HTTPS certificate if this PEM file (a CA, or the self-signed"
        " certificate itself) issued it, instead of the system's CAs (default: GATEHOUSE_CA)",
    )


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        nargs="?",
        type=float,
        const=600.0,
        metavar="SECONDS",
        help="follow the run until it is over or waits for a person (status changes and"
        " finished steps on stderr), then print its card; exit 1 if it failed, was"
        " rejected or cancelled, or SECONDS (default 600) ran out",
    )


def _api_arguments(cmd: dict[str, argparse.ArgumentParser]) -> None:
    run_id = "the run's id (run_…)"
    sm = cmd["submit"]
    sm.add_argument("--recipe", required=True, help="the recipe to run (gatehouse recipes)")
    sm.add_argument("--objective", required=True, help="what the run is for, in words")
    sm.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=JSON_OR_TEXT",
        help="a recipe parameter; repeat for more (a value that is not JSON is text)",
    )
    sm.add_argument(
        "--mode",
        default="full-cycle",
        choices=["plan-only", "run-plan", "full-cycle"],
        help="stop at the plan card, run a supplied plan, or all of it (default full-cycle)",
    )
    sm.add_argument("--plan", help="file with a plan (mode run-plan)")
    sm.add_argument("--idempotency-key", help="a repeated key returns the same run")
    _wait_option(sm)
    r = cmd["runs"]
    r.add_argument(
        "action",
        nargs="?",
        choices=["list", "fork", "watch"],
        default="list",
        help="default: list; watch RUN_ID follows a run's events live until it ends",
    )
    r.add_argument("run_id", nargs="?", help="the run to fork or watch")
    r.add_argument(
        "--status",
        help=f"list only runs in this status: {', '.join(st.value for st in RunStatus)}",
    )
    r.add_argument("--limit", type=int, help="at most this many runs (1-200; default 50)")
    r.add_argument("--cursor", help="the next page: the cursor the last page printed")
    r.add_argument("--from-step", type=int, help="fork: the plan step (1-based) to go live from")
    for name in ("show", "replay", "explain", "episodes"):
        cmd[name].add_argument("run_id", help=run_id)
    cmd["replay"].add_argument(
        "--current-rules",
        action="store_true",
        help="hold the run to today's profile and tool pool files instead of the versions it"
        " ran under (would it still pass?)",
    )
    c = cmd["calls"]
    c.add_argument("action", choices=["resolve"], help="resolve: an operator's word on a call")
    c.add_argument("op_key", help="the in-doubt call's op_key")
    outcome = c.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--applied", action="store_true", help="the call did take effect")
    outcome.add_argument("--not-applied", action="store_true", help="it did not: send it again")
    c.add_argument("--note", help="why you decided so (kept in the episode)")
    cmd["cancel"].add_argument("run_id", help=run_id)
    cmd["cancel"].add_argument("--reason", help="why (kept in the episode)")
    lg = cmd["ledger"]
    lg.add_argument("action", choices=["show", "verify"], help="show the rows, or verify the chain")
    lg.add_argument("run_id", help=run_id)
    for name in ("approve", "reject"):
        _wait_option(cmd[name])
        cmd[name].add_argument("run_id", help=run_id)
        cmd[name].add_argument(
            "--digest", help="the plan digest decided on (default: the plan card's)"
        )
        cmd[name].add_argument("--comment", help="a note kept with the decision")
    cmd["policies"].add_argument(
        "policy_id", nargs="?", help="show this profile or tool pool in full"
    )
    a = cmd["artifacts"]
    a.add_argument("action", choices=["list", "get"], help="list a run's, or get one's bytes")
    a.add_argument(
        "ref", metavar="RUN_ID|SHA256", help="list: the run; get: the artifact's SHA-256"
    )
    a.add_argument("-o", "--output", help="get: write the bytes to this file (default stdout)")
    cmd["security-events"].add_argument(
        "--limit", type=int, default=100, help="at most this many (default 100)"
    )


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = _dispatch(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): say nothing, and keep Python's own
        # flush at exit from complaining about the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 141
    except KeyboardInterrupt:
        code = 130
    except GatehouseError as exc:
        if exc.code is not ErrorCode.CONFIG_INVALID:
            raise
        sys.stderr.write(f"gatehouse: {exc.message}\n")
        code = 1
    sys.exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "demo":
        from shim._cli_demo import run_demo

        return run_demo(Path(args.dir), args.timeout)
    if cmd == "up":
        from ledger import resolve_tls
        from shim._cli_local import database_url
        from shim.local import StackInUseError, run_up

        tls = resolve_tls(args.tls_cert, args.tls_key)
        try:
            stopped = run_up(database_url(args)[0], args.port, args.workers, Path(args.var), tls)
        except StackInUseError as exc:
            sys.stderr.write(f"gatehouse up: {exc}\n")
            return 2
        return 0 if stopped else 1
    if cmd == "worker":
        # The shim never imports worker code: the worker is its own program.
        os.execv(sys.executable, [sys.executable, "-m", "worker"])  # noqa: S606  (fixed argv, no shell)
    if cmd == "doctor":  # the worker's own checks, as its own program too
        extra = ["--json"] if args.json else []
        os.execv(sys.executable, [sys.executable, "-m", "worker.doctor", *extra])  # noqa: S606
    if cmd == "mcp-pin":  # it starts MCP servers as a worker would: the worker's program
        extra = [args.pool, *(["--write"] if args.write else [])]
        os.execv(sys.executable, [sys.executable, "-m", "worker.mcp_pin", *extra])  # noqa: S606
    if cmd == "opa":
        from shim._opa_cli import run_opa

        return run_opa(args)
    if cmd == "tokens":
        from shim._tokens_cli import run_tokens

        return run_tokens(args)
    if cmd == "evidence":
        from shim._cli_evidence import run_evidence

        return run_evidence(args)
    if cmd in API_COMMANDS:
        from shim._cli_api import run_api

        return run_api(args)
    from shim import _cli_local

    run = {
        "shim": _cli_local.run_shim,
        "migrate": _cli_local.run_migrate,
        "readonly-role": _cli_local.run_readonly_role,
        "sql": _cli_local.run_sql,
    }
    return run[cmd](args)
