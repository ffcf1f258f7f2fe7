"""Bearer tokens → identities with roles.

The tokens file (``GATEHOUSE_TOKENS_FILE``) stores only SHA-256 digests of
tokens. ``gatehouse tokens add`` creates a token, stores its digest and
prints the token once. There is no default token and no anonymous access:
a shim without a tokens file refuses to start. A running shim follows the
file (``LiveTokens``): a token added, revoked or rotated there counts from
the next request on.

A token the store knows but may not honour is refused with its own code:
``token_expired`` (past its expiry, or rotated and past its grace) or
``token_revoked``; the refusal names the token's public id, never the token.

No token may stand for a name Gatehouse records as its own actor
(``contracts.identities``): a file giving one to a token does not load.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from contracts import ErrorCode, GatehouseError, JsonValue, Role, TokenEntry, TokenFile
from shim.tokens._file import Clock, entry_id, state_of, token_digest, utc_now
from shim.tokens._reserved import reserved_reason

__all__ = ["Identity", "TokenStore", "bearer", "missing_tokens_file"]


@dataclass(frozen=True)
class Identity:
    name: str
    roles: frozenset[Role]
    token_id: str | None = None  # the public id of the token it came with

    def has(self, *roles: Role) -> bool:
        return bool(self.roles.intersection(roles))


def missing_tokens_file(path: Path | None) -> str:
    where = path or "GATEHOUSE_TOKENS_FILE"
    return (
        f"no tokens file at {where}: create one with"
        " `gatehouse tokens add NAME --roles submitter,approver,operator --file PATH`"
        " and point GATEHOUSE_TOKENS_FILE at it"
    )


class TokenStore:
    """The tokens of one version of the file; expiry is judged at each check."""

    def __init__(self, entries: list[TokenEntry], clock: Clock = utc_now) -> None:
        for entry in entries:
            reason = reserved_reason(entry.identity)
            if reason is not None:  # a file edited by hand: refused whole, like a typo
                raise RuntimeError(f"the tokens file gives {entry_id(entry)} {reason}")
        self._entries = list(entries)
        self._clock = clock

    @classmethod
    def load(cls, path: Path | None, clock: Clock = utc_now) -> TokenStore:
        if path is None or not path.is_file():
            raise RuntimeError(missing_tokens_file(path))
        try:
            parsed = TokenFile.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            raise RuntimeError(f"the tokens file {path} is invalid: {exc}") from exc
        return cls(parsed.tokens, clock)

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, token: str) -> Identity:
        """The token's identity, or the refusal: unauthorized, token_expired, token_revoked."""
        digest = token_digest(token)
        found: TokenEntry | None = None
        for entry in self._entries:
            # Compare every entry in constant time: no early exit on a match.
            if hmac.compare_digest(entry.sha256, digest):
                found = entry
        if found is None:
            raise GatehouseError(ErrorCode.UNAUTHORIZED, "the bearer token is not valid")
        token_id = entry_id(found)
        named: dict[str, JsonValue] = {"token_id": token_id, "identity": found.identity}
        state = state_of(found, self._clock())
        if state == "revoked":
            raise GatehouseError(ErrorCode.TOKEN_REVOKED, f"token {token_id} was revoked", named)
        if state == "rotated":
            raise GatehouseError(
                ErrorCode.TOKEN_EXPIRED,
                f"token {token_id} was rotated (replaced by {found.replaced_by})"
                " and its grace period has ended",
                {**named, "replaced_by": found.replaced_by},
            )
        if state == "expired" and found.expires_at is not None:
            when = found.expires_at.isoformat()
            raise GatehouseError(
                ErrorCode.TOKEN_EXPIRED, f"token {token_id} expired at {when}", named
            )
        return Identity(found.identity, frozenset(found.roles), token_id)

    def named(self, name: str) -> Identity | None:
        """The identity ``name`` with the roles its tokens that may be honoured now
        (active, or rotated and in their grace) carry; None when it has none. For a
        person who acts through another door (Slack) as this identity."""
        now = self._clock()
        roles: set[Role] = set()
        for entry in self._entries:
            if entry.identity == name and state_of(entry, now) in ("active", "rotating"):
                roles.update(entry.roles)
        return Identity(name, frozenset(roles)) if roles else None

    def identify(self, token: str) -> Identity | None:
        """The token's identity, or None whatever the reason it is refused."""
        try:
            return self.check(token)
        except GatehouseError:
            return None


def bearer(header: str | None) -> str:
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise GatehouseError(ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")
    return token.strip()
