"""Tokens and roles (``ds.gatehouse_tokens_v1``).

The tokens file holds the SHA-256 of each bearer token, never the token, with
the identity it stands for and the roles that identity holds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from contracts._base import Closed, Digest, Identifier

__all__ = ["Role", "TokenEntry", "TokenFile"]


class Role(StrEnum):
    SUBMITTER = "submitter"  # may submit intents and read its own runs
    APPROVER = "approver"  # may approve or reject plans and read the runs it decides on
    OPERATOR = "operator"  # may read everything: runs, ledgers, evidence, policies


class TokenEntry(Closed):
    identity: Identifier
    roles: list[Role] = Field(min_length=1)
    sha256: Digest


class TokenFile(Closed):
    schema_id: Literal["ds.gatehouse_tokens_v1"] = "ds.gatehouse_tokens_v1"
    tokens: list[TokenEntry]
