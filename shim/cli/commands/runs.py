"""``gatehouse runs``: list runs, watch one live (``runs watch``), or fork one (``runs fork``)."""

from __future__ import annotations

import argparse

from contracts import RunStatus
from shim.cli.client import dump
from shim.cli.errors import Exit, UsageError
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import answer, show
from shim.cli.render import console, run_list
from shim.cli.watch import watch

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument(
        "action",
        nargs="?",
        choices=["list", "fork", "watch"],
        default="list",
        help="default: list; watch RUN_ID follows a run's events live until it ends",
    )
    run_id_argument(p, "the run to fork or watch", optional=True)
    p.add_argument(
        "--status",
        help=f"list only runs in this status: {', '.join(st.value for st in RunStatus)}",
    )
    p.add_argument("--limit", type=int, help="at most this many runs (1-200; default 50)")
    p.add_argument("--cursor", help="the next page: the cursor the last page printed")
    p.add_argument("--from-step", type=int, help="fork: the plan step (1-based) to go live from")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        if args.action == "watch":
            if not args.run_id:
                raise UsageError("runs watch RUN_ID")
            return Exit.OK if watch(api, args.run_id, console()) else Exit.FAILED
        if args.action == "fork":
            if not args.run_id or args.from_step is None:
                raise UsageError("runs fork RUN_ID --from-step N")
            answer(args, f"Fork of {args.run_id}", api.fork(args.run_id, args.from_step))
            return Exit.OK
        page = api.runs(args.status, args.limit, args.cursor)
        show(args, dump(page), run_list(page))
    return Exit.OK
