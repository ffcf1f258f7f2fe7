"""``gatehouse shim``: the HTTP API in the foreground, once its tokens and database are there."""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger import resolve_tls
from policies import catalog
from shim.cli.database import require_database, waited_for
from shim.cli.errors import UsageError
from shim.cli.options import (
    database_option,
    database_url,
    database_wait_option,
    tls_options,
    tokens_file_default,
)
from shim.local import serve_shim
from shim.settings import DEFAULT_HOST, plain_http_refusal

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}); any other than loopback needs"
        " HTTPS (--tls-cert/--tls-key) or --insecure-http",
    )
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="shim processes accepting on the one port (default 1): one uses at most a core,"
        " so give the intake more where cores are free; each has its own rate limits",
    )
    database_option(p)
    database_wait_option(p)
    p.add_argument(
        "--tokens-file",
        default=tokens_file_default(),
        help="the tokens file (default: GATEHOUSE_TOKENS_FILE, else var/tokens.json)",
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
    # Every policy file is read here first: a bad one is refused on one line (exit 1)
    # instead of a traceback from inside the server's start.
    catalog.load_all()
    if args.processes < 1:
        raise UsageError(f"--processes must be 1 or more, not {args.processes}")
    tokens = Path(args.tokens_file)
    if not tokens.is_file():
        raise UsageError(
            f"no tokens file at {tokens}: create one with `gatehouse tokens add NAME"
            f" --roles submitter,approver,operator --file {tokens}` (or start with `gatehouse up`,"
            " which makes two identities), or pass --tokens-file / set GATEHOUSE_TOKENS_FILE"
        )
    url, source = database_url(args)
    waited_for(args.wait_for_database, lambda: require_database(url, source))
    serve_shim(url, args.host, args.port, tokens, tls, processes=args.processes)
