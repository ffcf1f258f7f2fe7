"""``gatehouse mcp-pin``: an MCP tool pool's pins against its live servers.

It starts MCP servers as a worker would, so it runs as the worker's program.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "Exit 0 when every pin holds (or, with --write, was written)."
    p.add_argument("pool", help="a tool pool JSON file with mcp_proxy connectors")
    p.add_argument("--write", action="store_true", help="write the live definitions as pins")


def run(args: argparse.Namespace) -> int:
    extra = [args.pool, *(["--write"] if args.write else [])]
    os.execv(sys.executable, [sys.executable, "-m", "worker.mcp_pin", *extra])  # noqa: S606
