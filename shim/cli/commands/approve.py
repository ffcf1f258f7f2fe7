"""``gatehouse approve``: approve a run's plan, by its digest."""

from __future__ import annotations

import argparse

from shim.cli.decisions import decide, decision_arguments

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    decision_arguments(p)


def run(args: argparse.Namespace) -> int:
    return decide(args, approve=True)
