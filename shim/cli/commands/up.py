"""``gatehouse up``: the shim and workers as supervised processes (``shim.local.run_up``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger import resolve_tls
from shim.cli.errors import Exit
from shim.cli.options import database_option, database_url, tls_options
from shim.local import run_up

__all__ = ["HELP", "add_arguments", "run"]

HELP = "start the shim and workers as supervised processes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    database_option(p)
    p.add_argument("--port", type=int, default=8000, help="the shim's port (default 8000)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--var", default="var", help="folder for logs and workspaces (default var)")
    tls_options(p)


def run(args: argparse.Namespace) -> int:
    tls = resolve_tls(args.tls_cert, args.tls_key)
    stopped = run_up(database_url(args)[0], args.port, args.workers, Path(args.var), tls)
    return Exit.OK if stopped else Exit.FAILED
