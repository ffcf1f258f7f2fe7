"""``gatehouse logout``: end the session ``gatehouse login`` opened, on the server.

The token (``--token``, default ``GATEHOUSE_TOKEN``) is sent to
``POST /auth/oidc/logout``, which deletes the session's row: the token is refused
from that moment, by every shim. Only a session token (``oidc.…``) is ended this
way; a bearer token of the tokens file is revoked there (``gatehouse tokens
revoke``). A session that has ended already (logged out, expired, or deleted by an
operator) is said so, with exit 1.
"""

from __future__ import annotations

import argparse
import sys

from contracts import OIDC_PREFIX, ErrorCode
from shim.cli.client import ApiError
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import api_options, connect
from shim.cli.output import write_json

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)


def run(args: argparse.Namespace) -> int:
    if args.token and not str(args.token).startswith(OIDC_PREFIX):
        raise UsageError(
            "the token is not a session from `gatehouse login` (those begin oidc.); a bearer"
            " token of the tokens file is ended with `gatehouse tokens revoke ID`"
        )
    with connect(args) as api:
        try:
            ended = api.logout()
        except ApiError as exc:
            if exc.error_code is ErrorCode.UNAUTHORIZED:
                raise FailedError(
                    "the session had already ended (logged out, expired, or ended by an"
                    " operator): there is nothing to end"
                ) from exc
            raise
    if args.json:
        write_json(ended)
        return Exit.OK
    who = ended.get("identity") if isinstance(ended, dict) else None
    sys.stdout.write(f"signed out: the session of {who} has ended (unset GATEHOUSE_TOKEN)\n")
    return Exit.OK
