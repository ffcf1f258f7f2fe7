"""``gatehouse calls resolve``: an operator's word on an in-doubt call."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import answer

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("action", choices=["resolve"], help="resolve: an operator's word on a call")
    p.add_argument("op_key", help="the in-doubt call's op_key")
    outcome = p.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--applied", action="store_true", help="the call did take effect")
    outcome.add_argument("--not-applied", action="store_true", help="it did not: send it again")
    p.add_argument("--note", help="why you decided so (kept in the episode)")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        resolved = api.resolve(args.op_key, bool(args.applied), args.note)
    answer(args, f"Call {args.op_key[:16]}…", resolved)
    return Exit.OK
