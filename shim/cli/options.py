"""The options several commands share, each defined once, and what they make.

Defaults come from the environment when the parser is built, as the help says:
``GATEHOUSE_URL``, ``GATEHOUSE_TOKEN``, ``GATEHOUSE_CA``, ``GATEHOUSE_TOKENS_FILE``,
``GATEHOUSE_DATABASE_URL`` (then ``dbos-config.yaml``), ``GATEHOUSE_TLS_*``. Where
neither the flag nor the variable names the shim's URL or the database, the stack
a ``gatehouse up`` runs from this folder does (``var/stack.json``, while it runs).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from contracts import RUN_ID_PATTERN
from shim.cli.client import Client
from shim.cli.errors import UsageError
from shim.cli.output import note
from shim.client import DEFAULT_URL, shim_url
from shim.stackfile import running_stack

__all__ = [
    "DEFAULT_TOKENS_FILE",
    "DEFAULT_URL",
    "api_options",
    "ca_option",
    "connect",
    "database_option",
    "database_url",
    "database_wait_option",
    "json_option",
    "run_id_argument",
    "tls_options",
    "tokens_file_default",
    "wait_option",
]

DEFAULT_TOKENS_FILE = "var/tokens.json"


_RUN_ID = re.compile(RUN_ID_PATTERN)


def _run_id(text: str) -> str:
    if not _RUN_ID.fullmatch(text):
        shown = repr(text) if text else "an empty string"
        raise argparse.ArgumentTypeError(
            f"{shown} is not a run id (run_ then 32 hex digits, as `gatehouse runs` lists them)"
        )
    return text


def run_id_argument(
    p: argparse.ArgumentParser, what: str = "the run's id (run_…)", *, optional: bool = False
) -> None:
    """The positional RUN_ID, checked before anything is sent (an empty one would name
    the list route instead)."""
    p.add_argument("run_id", type=_run_id, nargs="?" if optional else None, help=what)


def json_option(p: argparse.ArgumentParser, what: str, *, form: str = "JSON") -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as {form}")


def ca_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ca",
        metavar="FILE",
        default=os.environ.get("GATEHOUSE_CA") or None,
        help="trust the shim's HTTPS certificate if this PEM file (a CA, or the self-signed"
        " certificate itself) issued it, instead of the system's CAs (default: GATEHOUSE_CA)",
    )


def api_options(p: argparse.ArgumentParser, *, with_json: bool = True) -> None:
    """--url, --token, --ca (and --json): a command that talks to a running shim."""
    p.add_argument(
        "--url",
        default=shim_url()[0],
        help="the shim's base URL (default: GATEHOUSE_URL, else the one `gatehouse up` in"
        f" this folder serves (var/stack.json), else {DEFAULT_URL})",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("GATEHOUSE_TOKEN"),
        help="bearer token (default: GATEHOUSE_TOKEN)",
    )
    ca_option(p)
    if with_json:
        json_option(p, "the API's answer")


@contextmanager
def connect(args: argparse.Namespace) -> Iterator[Client]:
    """A client for the shim at --url with --token (trusting --ca); no token: a usage error."""
    if not args.token:
        raise UsageError(
            "no token: set GATEHOUSE_TOKEN or pass --token (`gatehouse tokens add NAME --roles"
            " …` makes one; `gatehouse up` keeps its local ones in var/local-tokens.txt)"
        )
    # A shim that is busy says so with Retry-After: wait as it asks, for up to a minute.
    api = Client(args.url, args.token, ca=args.ca, retry_for=60.0, notice=note)
    try:
        yield api
    finally:
        api.close()


def wait_option(p: argparse.ArgumentParser) -> None:
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


# ``ledger`` (SQLAlchemy and more) is imported by the options that need it, when a
# command that has them builds its parser: a command that only talks HTTP starts
# without it.


def database_option(p: argparse.ArgumentParser) -> None:
    from ledger import CONFIG_FILE, DEFAULT_DATABASE_URL  # noqa: PLC0415  (heavy; see above)

    p.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
        " (default: GATEHOUSE_DATABASE_URL, else the one `gatehouse up` in this folder"
        f" runs on (var/stack.json), else system_database_url in ./{CONFIG_FILE},"
        f" else {DEFAULT_DATABASE_URL})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"seconds from 0 to 86400, not {text!r}")
    return value


def database_wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait-for-database",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="a database that does not answer yet is tried again for up to SECONDS, a line"
        " on stderr each time (default 0: fail at once); for a service started beside its"
        " database, whatever order the orchestrator starts them in",
    )


def database_url(args: argparse.Namespace) -> tuple[str, str]:
    """(url, where it came from): the flag, the variable, dbos-config.yaml, the default."""
    from ledger import resolve_database_url  # noqa: PLC0415  (heavy; see above)

    if args.database_url is not None:
        return args.database_url, "--database-url"
    if not os.environ.get("GATEHOUSE_DATABASE_URL", "").strip():
        stack = running_stack()
        if stack is not None:
            return stack.database_url, f"the stack `gatehouse up` runs ({stack.file})"
    return resolve_database_url()


def tls_options(p: argparse.ArgumentParser) -> None:
    from ledger import CONFIG_FILE  # noqa: PLC0415  (heavy; see above)

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


def tokens_file_default() -> str:
    """The tokens file a command uses unless told: GATEHOUSE_TOKENS_FILE, else the local one."""
    return os.environ.get("GATEHOUSE_TOKENS_FILE") or DEFAULT_TOKENS_FILE
