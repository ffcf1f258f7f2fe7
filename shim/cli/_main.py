"""``gatehouse``: parse, run the one command named, and say how it ended.

Dispatch is one level: the registry (``shim.cli.commands.COMMANDS``) names the
module, its ``run`` does the work. A command raises what went wrong; only
``main`` prints it (``failure`` says what it means) and picks the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys

from contracts import APP_VERSION
from shim import __version__
from shim.cli.commands import COMMANDS
from shim.cli.errors import EPILOG, Exit, failure
from shim.cli.output import note
from shim.cli.render import PrintableStream

__all__ = ["build_parser", "main"]


def _version() -> str:
    return f"gatehouse {__version__} (application version {APP_VERSION})"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gatehouse",
        description="A durable control plane for AI agent runs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        parser = sub.add_parser(
            name,
            help=command.HELP,
            description=command.HELP,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(parser)
    return p


def main(argv: list[str] | None = None) -> None:
    """Parse, run, say how it ended, exit. Everything written meanwhile passes through
    ``PrintableStream``: no text from a run, a model or a tool drives the terminal."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(sys.stdout), PrintableStream(sys.stderr)
    try:
        _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str] | None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = COMMANDS[args.command].run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): say nothing, and keep Python's own
        # flush at exit from complaining about the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = Exit.BROKEN_PIPE
    except KeyboardInterrupt:
        code = Exit.INTERRUPTED
    except Exception as exc:
        said = failure(exc, args)
        if said is None:
            raise
        note(said.message)
        for line in said.details:
            sys.stderr.write(line + "\n")
        code = said.exit
    sys.exit(code)
