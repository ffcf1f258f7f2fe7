"""``gatehouse up``: the shim and workers as supervised processes (``shim.local.run_up``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger import resolve_tls
from policies import catalog
from shim.cli.errors import Exit, UsageError
from shim.cli.options import database_option, database_url, tls_options
from shim.local import run_up
from shim.settings import DEFAULT_HOST, plain_http_refusal
from shim.stackfile import DEFAULT_VAR

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    database_option(p)
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the shim's address to listen on (default {DEFAULT_HOST}); any other than"
        " loopback needs HTTPS (--tls-cert/--tls-key) or --insecure-http",
    )
    p.add_argument("--port", type=int, default=8000, help="the shim's port (default 8000)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--var",
        default=str(DEFAULT_VAR),
        help=f"folder for everything the stack keeps: tokens, logs, workspaces, the anchor"
        f" file, the OPA trust store (default {DEFAULT_VAR})",
    )
    tls_options(p)
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP on a --host other than loopback (only behind a proxy or"
        " mesh that terminates TLS)",
    )


def run(args: argparse.Namespace) -> int:
    tls = resolve_tls(args.tls_cert, args.tls_key)
    refusal = plain_http_refusal(args.host, tls=tls is not None, insecure_http=args.insecure_http)
    if refusal:
        raise UsageError(refusal)
    # A bad policy file is refused here, on one line, before anything starts: the
    # shim would fail at its start and be retried for ever.
    catalog.load_all()
    url = database_url(args)[0]
    stopped = run_up(url, args.port, args.workers, Path(args.var), tls, host=args.host)
    return Exit.OK if stopped else Exit.FAILED
