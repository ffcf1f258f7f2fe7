"""``gatehouse doctor``: the worker's own checks of this machine, run as the worker's program."""

from __future__ import annotations

import argparse
import os
import sys

from shim.cli.options import json_option

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "Exit 0 when the sandbox and the database are usable."
    json_option(p, "the checks")


def run(args: argparse.Namespace) -> int:
    extra = ["--json"] if args.json else []
    os.execv(sys.executable, [sys.executable, "-m", "worker.doctor", *extra])  # noqa: S606
