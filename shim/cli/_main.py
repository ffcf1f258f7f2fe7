"""``gatehouse``: parse, run the one command named, and say how it ended.

Dispatch is one level: the registry (``shim.cli.commands.COMMANDS``) names the
module, ``load`` imports it, its ``run`` does the work. Only the named command's
module is imported, and its arguments declared: ``--help`` and ``--version``
import no command and nothing a command needs. A command raises what went
wrong; only ``main`` prints it (``shim.cli.failure`` says what it means) and
picks the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable

from shim import __version__
from shim.cli.commands import COMMANDS, load
from shim.cli.errors import EPILOG, Exit
from shim.cli.printable import PrintableStream

__all__ = ["build_parser", "main"]

# contracts.APP_VERSION, the DBOS application version runs are enqueued under, copied
# because importing the contracts takes ~0.5 s and ``--version`` must answer at once;
# tests/unit/shim/cli/test_cli_start.py holds the two equal.
APP_VERSION = "gatehouse-7"


def _version() -> str:
    return f"gatehouse {__version__} (application version {APP_VERSION})"


def build_parser(declare: Iterable[str] = COMMANDS) -> argparse.ArgumentParser:
    """The whole command line; only the commands in ``declare`` have their arguments
    declared (their modules imported). ``main`` declares the one it was given."""
    declared = set(declare)
    p = argparse.ArgumentParser(
        prog="gatehouse",
        description="A durable control plane for AI agent runs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, info in COMMANDS.items():
        parser = sub.add_parser(
            name,
            help=info.HELP,
            description=info.HELP,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name in declared:
            load(name).add_arguments(parser)
    return p


def _named(argv: list[str]) -> list[str]:
    """The command ``argv`` names: its first word that is no option (``gatehouse`` has
    no option that takes a value), or none."""
    return [word for word in argv if not word.startswith("-")][:1]


def main(argv: list[str] | None = None) -> None:
    """Parse, run, say how it ended, exit. Everything written meanwhile passes through
    ``PrintableStream``: no text from a run, a model or a tool drives the terminal."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(sys.stdout), PrintableStream(sys.stderr)
    try:
        _main(sys.argv[1:] if argv is None else argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> None:
    args = build_parser(_named(argv)).parse_args(argv)
    try:
        code = load(args.command).run(args)
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
        # Imported only now: what it translates from is heavy, and --help needs none of it.
        from shim.cli.failure import failure, tell  # noqa: PLC0415

        said = failure(exc, args)
        if said is None:
            raise
        tell(said)
        code = said.exit
    sys.exit(code)
