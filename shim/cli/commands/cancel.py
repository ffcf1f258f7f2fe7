"""``gatehouse cancel``: cancel a run (its submitter, or an operator)."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import answer

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    run_id_argument(p)
    p.add_argument("--reason", help="why (kept in the episode)")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        cancelled = api.cancel(args.run_id, args.reason)
    answer(args, f"Cancel of {args.run_id}", cancelled)
    return Exit.OK
