"""``gatehouse artifacts``: a run's artifacts (``list``), or one's bytes (``get``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import note, rows, show
from shim.cli.render import records, short

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("action", choices=["list", "get"], help="list a run's, or get one's bytes")
    p.add_argument(
        "ref", metavar="RUN_ID|SHA256", help="list: the run; get: the artifact's SHA-256"
    )
    p.add_argument("-o", "--output", help="get: write the bytes to this file (default stdout)")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        if args.action == "get":
            content = api.artifact(args.ref)
            if args.output:
                Path(args.output).write_bytes(content)
                note(f"wrote {len(content)} bytes to {args.output}")
            else:
                sys.stdout.buffer.write(content)
            return Exit.OK
        raw = api.get_json(f"/runs/{args.ref}/artifacts")
    listed = rows(raw, "artifacts")
    cols = ["step_id", "name", "media_type", "size_bytes", "sha256"]
    table = records(f"Artifacts of {args.ref}", cols, listed, limit=64)
    if listed:
        table.caption = f"fetch one: gatehouse artifacts get {short(listed[0].get('sha256'), 64)}"
    show(args, raw, table)
    return Exit.OK
