"""The tokens file: what state each token is in, and changing the file safely.

Every change (add, revoke, rotate) reads the file, changes the entries and
writes a new file beside it that replaces the old one by ``rename``: a shim
re-reading the file sees the old version or the new one, never half of one.
A lock file beside it keeps two changes at once from losing one of them.

A token is ``active`` until it expires; ``rotating`` once it was rotated and
until its grace period ends, then ``rotated``; ``expired`` after its
``expires_at``; ``revoked`` once revoked, whatever else is true.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from contracts import Role, TokenEntry, TokenFile
from shim.tokens._reserved import reserved_reason

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LIFETIME",
    "Clock",
    "Issued",
    "TokenFileError",
    "TokenRefusedError",
    "TokenState",
    "add_token",
    "entry_id",
    "issue_token",
    "parse_duration",
    "read_tokens",
    "revoke_token",
    "rotate_token",
    "state_of",
    "token_digest",
    "utc_now",
]

# `gatehouse tokens add` and `rotate` without --expires-in/--expires-at/--no-expiry.
DEFAULT_LIFETIME = timedelta(days=90)
# `gatehouse tokens rotate` without --grace: the old token's remaining life.
DEFAULT_GRACE = timedelta(hours=1)

TokenState = Literal["active", "rotating", "expired", "rotated", "revoked"]
Clock = Callable[[], datetime]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class TokenFileError(Exception):
    """A change the tokens file cannot take: an unknown id, a revoked token, …"""


class TokenRefusedError(TokenFileError):
    """A change the file's tokens refuse, asked for rightly: the identity already holds a
    live token, the token was revoked or rotated. The CLI's exit 1, not a usage error."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def entry_id(entry: TokenEntry) -> str:
    """The token's public id; an entry from before ids has one derived from its digest."""
    return entry.token_id or "tok_" + entry.sha256[:8]


def state_of(entry: TokenEntry, now: datetime) -> TokenState:
    if entry.revoked_at is not None and entry.revoked_at <= now:
        return "revoked"
    ended = entry.expires_at is not None and entry.expires_at <= now
    if entry.replaced_by is not None:
        return "rotated" if ended else "rotating"
    return "expired" if ended else "active"


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` (one number, one unit)."""
    found = re.fullmatch(r"\s*([0-9]{1,6})\s*([smhdw])\s*", text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration: write a number and s, m, h, d or w (90d)")
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def read_tokens(path: Path) -> list[TokenEntry]:
    return TokenFile.model_validate_json(path.read_bytes()).tokens


@dataclass(frozen=True)
class Issued:
    """A new token: the secret (shown once, never stored) and its entry."""

    token: str
    entry: TokenEntry


def issue_token(
    path: Path,
    identity: str,
    roles: list[Role],
    *,
    expires_at: datetime | None,
    clock: Clock = utc_now,
    another: bool = True,
) -> Issued:
    """Add a new token for ``identity`` to the file (created 0600).

    An identity has one set of roles: a token with other roles than its live ones
    is refused. ``another=False`` also refuses a second live token with the same
    roles (the CLI's default: a second ``tokens add`` is more often a mistake). A name
    Gatehouse records as its own actor (``contracts.identities``) is refused."""
    _refuse_reserved(identity)
    with _changing(path) as entries:
        now = clock()
        _refuse_a_second(entries, identity, roles, now, another=another)
        issued = _new(entries, identity, roles, expires_at, now)
        entries.append(issued.entry)
    return issued


def add_token(
    path: Path, identity: str, roles: list[Role], *, expires_at: datetime | None = None
) -> str:
    """Add a token (no expiry unless given) and return it: for `up`, the demo and tests."""
    return issue_token(path, identity, roles, expires_at=expires_at).token


def revoke_token(path: Path, token_id: str, *, clock: Clock = utc_now) -> TokenEntry:
    """Mark the token revoked; return its entry (already revoked: unchanged)."""
    with _changing(path) as entries:
        at = _index(entries, token_id)
        if entries[at].revoked_at is None:
            entries[at] = entries[at].model_copy(update={"revoked_at": clock()})
        return entries[at]


def rotate_token(
    path: Path,
    token_id: str,
    *,
    grace: timedelta,
    expires_at: datetime | None,
    clock: Clock = utc_now,
) -> tuple[TokenEntry, Issued]:
    """A new token for the same identity and roles; the old one ends after ``grace``."""
    now = clock()
    with _changing(path) as entries:
        at = _index(entries, token_id)
        old = entries[at]
        _refuse_reserved(old.identity)  # an entry written by hand
        state = state_of(old, now)
        if state == "revoked":
            raise TokenRefusedError(f"{token_id} was revoked: add a new token instead")
        if old.replaced_by is not None:
            raise TokenRefusedError(f"{token_id} was already rotated: rotate {old.replaced_by}")
        issued = _new(entries, old.identity, list(old.roles), expires_at, now)
        ends = now + grace
        if old.expires_at is not None and old.expires_at < ends:
            ends = old.expires_at  # grace never lengthens a token's life
        entries[at] = old.model_copy(
            update={"replaced_by": issued.entry.token_id, "expires_at": ends}
        )
        entries.append(issued.entry)
        return entries[at], issued


def _refuse_reserved(identity: str) -> None:
    reason = reserved_reason(identity)
    if reason is not None:
        raise TokenFileError(f"{reason}; choose another identity")


def _refuse_a_second(
    entries: list[TokenEntry], identity: str, roles: list[Role], now: datetime, *, another: bool
) -> None:
    held = [e for e in entries if e.identity == identity and state_of(e, now) == "active"]
    if not held:
        return
    listed = ", ".join(f"{entry_id(e)} ({','.join(r.value for r in e.roles)})" for e in held)
    if any(set(e.roles) != set(roles) for e in held):
        raise TokenRefusedError(
            f"{identity} already has a live token with other roles: {listed}; an identity has"
            f" one set of roles: `gatehouse tokens revoke {entry_id(held[0])}` it, then add this"
            " one, or add it under another name"
        )
    if not another:
        raise TokenRefusedError(
            f"{identity} already has a live token: {listed}; `gatehouse tokens rotate"
            f" {entry_id(held[0])}` gives it a new secret, --another adds a second one with the"
            " same roles, or add this one under another name"
        )


def _new(
    entries: list[TokenEntry],
    identity: str,
    roles: list[Role],
    expires_at: datetime | None,
    now: datetime,
) -> Issued:
    taken = {entry_id(e) for e in entries}
    token_id = "tok_" + secrets.token_hex(4)
    while token_id in taken:
        token_id = "tok_" + secrets.token_hex(4)
    token = "gh_" + secrets.token_urlsafe(32)
    entry = TokenEntry.model_validate(
        {
            "identity": identity,
            "roles": roles,
            "sha256": token_digest(token),
            "token_id": token_id,
            "created_at": now,
            "expires_at": expires_at,
        }
    )
    return Issued(token, entry)


def _index(entries: list[TokenEntry], token_id: str) -> int:
    for at, entry in enumerate(entries):
        if entry_id(entry) == token_id:
            return at
    raise TokenFileError(f"no token {token_id}: `gatehouse tokens list` shows the ids")


@contextmanager
def _changing(path: Path) -> Iterator[list[TokenEntry]]:
    """The file's entries, to change in place; written back atomically on success."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path.with_name(f".{path.name}.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = read_tokens(path) if path.is_file() else []
        yield entries
        # Give an old entry its derived id for good, so the id never depends on how it is read.
        fixed = [
            e if e.token_id else e.model_copy(update={"token_id": entry_id(e)}) for e in entries
        ]
        _write(path, TokenFile(tokens=fixed))
    finally:
        os.close(lock)  # closing releases the lock


def _write(path: Path, body: TokenFile) -> None:
    text = json.dumps(body.model_dump(mode="json"), indent=2) + "\n"
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
    except BaseException:
        with suppress(OSError):
            tmp.unlink()
        raise
