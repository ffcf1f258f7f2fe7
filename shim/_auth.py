"""Bearer tokens → identities with roles.

The tokens file (``GATEHOUSE_TOKENS_FILE``) stores only SHA-256 digests of
tokens. ``gatehouse tokens add`` creates a token, stores its digest and
prints the token once. There is no default token and no anonymous access:
a shim without a tokens file refuses to start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from contracts import ErrorCode, GatehouseError, Role, TokenEntry, TokenFile

__all__ = ["Identity", "TokenStore", "add_token", "bearer", "token_digest"]


@dataclass(frozen=True)
class Identity:
    name: str
    roles: frozenset[Role]

    def has(self, *roles: Role) -> bool:
        return bool(self.roles.intersection(roles))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    def __init__(self, entries: list[TokenEntry]) -> None:
        self._entries = [(e.sha256, Identity(e.identity, frozenset(e.roles))) for e in entries]

    @classmethod
    def load(cls, path: Path | None) -> TokenStore:
        if path is None or not path.is_file():
            where = path or "GATEHOUSE_TOKENS_FILE"
            raise RuntimeError(
                f"no tokens file at {where}: create one with"
                " `gatehouse tokens add NAME --roles submitter,approver,operator --file PATH`"
                " and point GATEHOUSE_TOKENS_FILE at it"
            )
        try:
            parsed = TokenFile.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            raise RuntimeError(f"the tokens file {path} is invalid: {exc}") from exc
        return cls(parsed.tokens)

    def identify(self, token: str) -> Identity | None:
        digest = token_digest(token)
        found = None
        for stored, who in self._entries:
            # Compare every entry in constant time: no early exit on a match.
            if hmac.compare_digest(stored, digest):
                found = who
        return found


def bearer(header: str | None) -> str:
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise GatehouseError(ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")
    return token.strip()


def add_token(path: Path, identity: str, roles: list[Role]) -> str:
    """Append a new token for ``identity`` to the file (created 0600); return the token."""
    entries: list[TokenEntry] = []
    if path.is_file():
        entries = TokenFile.model_validate_json(path.read_bytes()).tokens
    token = "gh_" + secrets.token_urlsafe(32)
    entries.append(TokenEntry(identity=identity, roles=roles, sha256=token_digest(token)))
    body = TokenFile(tokens=entries).model_dump(mode="json")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(body, out, indent=2)
    tmp.replace(path)
    return token
