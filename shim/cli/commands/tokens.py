"""``gatehouse tokens add|list|revoke|rotate``: the tokens file on this machine.

A new token is printed once, on stdout; everything else goes to stderr. The
listing shows each token's public id, never the token or its digest. A
running shim follows the file, so each change counts within a second. A change
the tokens already there refuse (a second token for an identity, rotating a revoked
one) exits 1; a wrong flag, duration or id exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from contracts import JsonValue, Role, TokenEntry
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import json_option, tokens_file_default
from shim.cli.output import note
from shim.cli.render import print_records
from shim.tokens import (
    DEFAULT_GRACE,
    DEFAULT_LIFETIME,
    Issued,
    TokenFileError,
    TokenRefusedError,
    entry_id,
    issue_token,
    parse_duration,
    read_tokens,
    revoke_token,
    rotate_token,
    state_of,
    utc_now,
)

__all__ = ["add_arguments", "run"]

_LIVE = "a running shim picks the change up within a second"


def _file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file",
        default=tokens_file_default(),
        help="the tokens file (default: GATEHOUSE_TOKENS_FILE, else var/tokens.json)",
    )


def _expiry_options(parser: argparse.ArgumentParser) -> None:
    when = parser.add_mutually_exclusive_group()
    when.add_argument(
        "--expires-in", metavar="DURATION", help="lifetime, e.g. 30d, 12h, 45m (default 90d)"
    )
    when.add_argument(
        "--expires-at",
        metavar="ISO",
        help="expiry as ISO 8601, e.g. 2026-01-31T18:00Z (UTC if no zone)",
    )
    when.add_argument("--no-expiry", action="store_true", help="the token never expires")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    add = sub.add_parser("add", help="create a token for an identity and print it once")
    add.add_argument(
        "identity",
        help="who the token stands for, e.g. alice; never a name Gatehouse records as its"
        " own actor (policy:…, system:…, dbos, …: contracts/identities.py)",
    )
    add.add_argument(
        "--roles", required=True, help="comma-separated: submitter, approver, operator"
    )
    add.add_argument(
        "--another",
        action="store_true",
        help="add a second live token for an identity that has one (same roles; e.g. for a"
        " second machine); without it, that is refused",
    )
    _expiry_options(add)
    _file_option(add)
    listing = sub.add_parser("list", help="id, identity, roles, created, expires and state of each")
    json_option(listing, "the entries")
    _file_option(listing)
    revoke = sub.add_parser("revoke", help="refuse a token from now on (token_revoked)")
    revoke.add_argument("token_id", metavar="ID", help="the token's id (tok_…), as listed")
    _file_option(revoke)
    rotate = sub.add_parser(
        "rotate", help="a new token for the same identity and roles; the old one ends after --grace"
    )
    rotate.add_argument("token_id", metavar="ID", help="the token's id (tok_…), as listed")
    rotate.add_argument(
        "--grace", help="how long the old token still works (default 1h; 0s: not at all)"
    )
    _expiry_options(rotate)
    _file_option(rotate)


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        if args.tokens_command == "add":
            return _add(args, path)
        if args.tokens_command == "list":
            return _list(path, as_json=args.json)
        if args.tokens_command == "revoke":
            entry = revoke_token(path, args.token_id)
            note(f"{args.token_id} ({entry.identity}) is revoked in {path}; {_LIVE}")
            return Exit.OK
        return _rotate(args, path)
    except TokenRefusedError as exc:  # asked rightly, refused by the tokens already there
        raise FailedError(f"{path}: {exc}") from exc
    except (TokenFileError, ValueError) as exc:  # ValidationError is a ValueError
        raise UsageError(f"{path}: {str(exc).splitlines()[0]}") from exc
    except OSError as exc:
        raise UsageError(f"cannot use the tokens file {path}: {exc.strerror or exc}") from exc


def _expiry(args: argparse.Namespace, now: datetime) -> datetime | None:
    if args.no_expiry:
        return None
    if args.expires_at is not None:
        try:
            at = datetime.fromisoformat(args.expires_at)
        except ValueError as exc:
            raise ValueError(f"--expires-at {args.expires_at!r} is not an ISO 8601 time") from exc
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        if at <= now:
            raise ValueError(f"--expires-at {args.expires_at} is already past")
        return at
    lifetime = DEFAULT_LIFETIME if args.expires_in is None else parse_duration(args.expires_in)
    if lifetime <= timedelta(0):
        raise ValueError("--expires-in must be longer than 0")
    return now + lifetime


def _roles(text: str) -> list[Role]:
    names = [r.strip() for r in text.split(",") if r.strip()]
    valid = ", ".join(r.value for r in Role)
    unknown = [n for n in names if n not in {r.value for r in Role}]
    if unknown or not names:
        what = f"unknown role {', '.join(map(repr, unknown))}" if unknown else "no role given"
        raise TokenFileError(f"{what}: valid roles are {valid}")
    return [Role(n) for n in names]


def _add(args: argparse.Namespace, path: Path) -> int:
    try:
        roles = _roles(args.roles)
    except TokenFileError as exc:  # before the file is touched: a bad role creates no file
        raise UsageError(str(exc)) from exc
    now = utc_now()
    issued = issue_token(
        path,
        args.identity,
        roles,
        expires_at=_expiry(args, now),
        clock=lambda: now,
        another=args.another,
    )
    _show(issued, f"token for {args.identity} ({', '.join(r.value for r in roles)})")
    note(f"added {issued.entry.token_id} to {path}; {_LIVE}")
    return Exit.OK


def _rotate(args: argparse.Namespace, path: Path) -> int:
    now = utc_now()
    grace = DEFAULT_GRACE if args.grace is None else parse_duration(args.grace)
    old, issued = rotate_token(
        path, args.token_id, grace=grace, expires_at=_expiry(args, now), clock=lambda: now
    )
    _show(issued, f"new token for {old.identity} (replaces {args.token_id})")
    until = _when(old.expires_at)
    note(f"{args.token_id} stays valid until {until}, then is refused; {_LIVE}")
    return Exit.OK


def _show(issued: Issued, what: str) -> None:
    out = sys.stdout
    expires = _when(issued.entry.expires_at)
    out.write(f"{what}, id {issued.entry.token_id}, expires {expires}; shown once:\n")
    out.write(issued.token + "\n")


def _when(at: datetime | None) -> str:
    # one word (an ISO 8601 stamp): a narrow terminal never wraps or cuts it
    return "never" if at is None else at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(entry: TokenEntry, now: datetime) -> dict[str, JsonValue]:
    return {
        "id": entry_id(entry),
        "identity": entry.identity,
        "roles": ",".join(r.value for r in entry.roles),
        "created": None if entry.created_at is None else _when(entry.created_at),
        "expires": "no expiry" if entry.expires_at is None else _when(entry.expires_at),
        "state": state_of(entry, now),
        "replaced_by": entry.replaced_by,
        "revoked": None if entry.revoked_at is None else _when(entry.revoked_at),
    }


def _list(path: Path, *, as_json: bool) -> int:
    if not path.is_file():
        raise UsageError(
            f"no tokens file at {path}: `gatehouse tokens add NAME --roles …` makes one"
        )
    try:
        entries = read_tokens(path)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise UsageError(f"the tokens file {path} is invalid: {first}") from exc
    now = utc_now()
    rows = [_row(e, now) for e in entries]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return Exit.OK
    columns = ["id", "identity", "roles", "created", "expires", "state", "replaced_by"]
    print_records(f"{len(rows)} token(s) in {path}", columns, rows)
    return Exit.OK
