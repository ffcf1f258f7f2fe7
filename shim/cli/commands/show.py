"""``gatehouse show``: one run, its plan card, digest, steps and decisions."""

from __future__ import annotations

import argparse

from shim.cli.client import dump
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import show
from shim.cli.run_card import run_card

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    run_id_argument(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        view = api.run(args.run_id)
    show(args, dump(view), *run_card(view))
    return Exit.OK
