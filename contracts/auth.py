"""Tokens and roles (``ds.gatehouse_tokens_v1``).

The tokens file holds the SHA-256 of each bearer token, never the token, with
the identity it stands for, the roles that identity holds, and the token's
life: a public id, when it was made, when it expires, whether it was revoked,
and the token that replaced it when it was rotated.

Entries written before tokens could expire carry only ``identity``, ``roles``
and ``sha256``: they load unchanged, never expire, and their id is derived
from their digest (see ``shim.tokens.entry_id``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StringConstraints, model_validator

from contracts._base import Closed, Digest, Identifier

__all__ = ["Role", "TokenEntry", "TokenFile", "TokenId"]

# A token's public name: shown by `gatehouse tokens list`, named in security
# events, never enough to act with.
TokenId = Annotated[str, StringConstraints(pattern=r"^tok_[0-9a-f]{8}$")]


class Role(StrEnum):
    SUBMITTER = "submitter"  # may submit intents and read its own runs
    APPROVER = "approver"  # may approve or reject plans and read the runs it decides on
    OPERATOR = "operator"  # may read everything: runs, ledgers, evidence, policies


class TokenEntry(Closed):
    identity: Identifier
    roles: list[Role] = Field(min_length=1)
    sha256: Digest
    token_id: TokenId | None = None
    created_at: AwareDatetime | None = None
    expires_at: AwareDatetime | None = None  # None: never expires
    revoked_at: AwareDatetime | None = None
    # Set when the token was rotated: it stays valid until expires_at (the grace).
    replaced_by: TokenId | None = None


class TokenFile(Closed):
    schema_id: Literal["ds.gatehouse_tokens_v1"] = "ds.gatehouse_tokens_v1"
    tokens: list[TokenEntry]

    @model_validator(mode="after")
    def _distinct(self) -> TokenFile:
        ids = [e.token_id for e in self.tokens if e.token_id is not None]
        if len(ids) != len(set(ids)):
            raise ValueError("two tokens share a token_id")
        digests = [e.sha256 for e in self.tokens]
        if len(digests) != len(set(digests)):
            raise ValueError("two tokens share a digest")
        return self
