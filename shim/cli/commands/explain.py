"""``gatehouse explain``: a model's report on a finished run, written from its evidence only."""

from __future__ import annotations

import argparse
import sys

from shim.cli.client import dump, explain_text
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import write_json

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    run_id_argument(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        report = api.explain(args.run_id)
    if args.json:
        write_json(dump(report))
    else:
        sys.stdout.write(explain_text(report) + "\n")
    return Exit.OK
