"""``gatehouse replay``: a finished run replayed from its ledger; its trace digest compared."""

from __future__ import annotations

import argparse

from shim.cli.client import dump
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import show
from shim.cli.render import fields, records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    run_id_argument(p)
    p.add_argument(
        "--current-rules",
        action="store_true",
        help="hold the run to today's profile, tool pool and Cedar policy set files instead of"
        " the versions it ran under (would it still pass?)",
    )


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        report = api.replay(args.run_id, "current" if args.current_rules else "recorded")
    raw = dump(report)
    title = "Replay: trace digest " + ("matches" if report.match else "DIVERGED")
    info = {k: v for k, v in raw.items() if k != "divergences"} if isinstance(raw, dict) else {}
    divergences = [d.model_dump(mode="json") for d in report.divergences]
    cols = list(divergences[0]) if divergences else []
    tables = [fields(title, info)]
    if divergences:
        tables.append(records("Divergences", cols, divergences))
    show(args, raw, *tables)
    return Exit.OK if report.match else Exit.CHECK_FAILED
