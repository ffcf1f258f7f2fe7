"""What an exception that reached ``main`` means for the person at the terminal.

Foreign exceptions are translated once, here: the shim's refusals (``ApiError``),
a shim that cannot be reached, a stack already running (``StackInUseError``:
refused, so exit 1), a configuration or a policy file (``PolicyFileError``) that
does not load. ``main`` imports this module only when a command raised: what it
translates from (the HTTP client, the contracts, the local stack) is heavy to
import, and ``--help`` needs none of it.
"""

from __future__ import annotations

import argparse
import sys

import httpx

from contracts import ErrorCode, GatehouseError
from policies.catalog import PolicyFileError
from shim.cli.client import ApiError
from shim.cli.errors import CommandError, FailedError
from shim.cli.output import note
from shim.cli.render import error_lines
from shim.local import StackInUseError

__all__ = ["failure", "tell"]


def failure(exc: Exception, args: argparse.Namespace) -> CommandError | None:
    """What ``exc`` means for the person at the terminal; None: a bug, let it show."""
    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, ApiError):
        hint = ["  check the token: GATEHOUSE_TOKEN or --token"] if exc.status == 401 else []
        # The shim's message states the first problem of its details: said once.
        lines = [line for line in error_lines(exc.details) if line.strip() not in exc.message]
        return FailedError(f"{exc.code} (HTTP {exc.status}): {exc.message}", *lines, *hint)
    if isinstance(exc, httpx.HTTPError) and hasattr(args, "url"):
        return FailedError(
            f"cannot reach the shim at {args.url} ({type(exc).__name__}: {exc}): start it"
            " (gatehouse up, or gatehouse shim) or point --url / GATEHOUSE_URL at it"
        )
    if isinstance(exc, StackInUseError):
        return FailedError(str(exc))
    if isinstance(exc, GatehouseError) and exc.code is ErrorCode.CONFIG_INVALID:
        return FailedError(exc.message)
    if isinstance(exc, PolicyFileError):  # the shim's or up's start-up check
        return FailedError(str(exc))
    return None


def tell(said: CommandError) -> None:
    """``gatehouse: MESSAGE`` on stderr, then each of its details on a line of its own."""
    note(said.message)
    for line in said.details:
        sys.stderr.write(line + "\n")
