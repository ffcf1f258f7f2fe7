"""How a ``gatehouse`` command ends: its exit code, and what an error prints.

Exception tree::

    Exception
     └── CommandError        a command refuses or fails: a line to print, and the exit
          ├── UsageError     the person asked wrongly (a flag, a file, no token): exit 2
          └── FailedError    it was refused or failed: exit 1
               └── UnreachableError  the database does not answer (it may later)

Commands raise; ``main`` alone prints. Foreign exceptions that reach it are
translated once, in ``shim.cli.failure``, imported only then: this module is
imported by every command and by ``--help``, and stays light.
"""

from __future__ import annotations

import textwrap
from enum import IntEnum

__all__ = [
    "EPILOG",
    "EXIT_CODES",
    "CommandError",
    "Exit",
    "FailedError",
    "UnreachableError",
    "UsageError",
]


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    CHECK_FAILED = 3
    INTERRUPTED = 130
    BROKEN_PIPE = 141


# What each exit code means, as --help and docs/cli.md say it (a test holds them equal).
EXIT_CODES: dict[Exit, str] = {
    Exit.OK: "done",
    Exit.FAILED: "refused or failed: the shim answered with an error (its code, message and"
    " details are printed), or the shim or the database could not be reached, or an evidence"
    " bundle does not verify (the first check that failed is printed), or the tokens file"
    " refuses the change (the identity already has a live token)",
    Exit.USAGE: "usage: a bad flag or argument, no token, a missing tokens file, an unreadable"
    " file",
    Exit.CHECK_FAILED: "a check failed: a replay diverged, a ledger chain is broken, or a"
    " policy test's expectation failed",
    Exit.INTERRUPTED: "interrupted (Ctrl-C)",
    Exit.BROKEN_PIPE: "the output was closed early (a pipe into head); nothing is printed about it",
}
EPILOG = "exit codes:\n" + "\n".join(
    textwrap.fill(v, 79, initial_indent=f"  {k:<4} ", subsequent_indent=" " * 7)
    for k, v in EXIT_CODES.items()
)


class CommandError(Exception):
    """``message`` is printed after ``gatehouse:``, each of ``details`` on a line of its own."""

    exit = Exit.FAILED

    def __init__(self, message: str, *details: str) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class UsageError(CommandError):
    exit = Exit.USAGE


class FailedError(CommandError):
    exit = Exit.FAILED


class UnreachableError(FailedError):
    """The database did not answer: a service started beside it may wait and try again."""
