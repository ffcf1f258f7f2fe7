"""``gatehouse episodes``: a run's MOVA episodes."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import rows, show
from shim.cli.render import records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    run_id_argument(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        raw = api.get_json(f"/runs/{args.run_id}/episodes")
    cols = ["recorded_at", "step_id", "episode_type", "result_status", "episode_id"]
    show(args, raw, records(f"Episodes of {args.run_id}", cols, rows(raw, "episodes")))
    return Exit.OK
