"""Signing in to the dashboard with the company's identity provider: the OIDC file
(``GATEHOUSE_OIDC``, YAML or JSON).

Example::

    issuer: https://login.example.com            # its /.well-known/openid-configuration
    client_id: gatehouse
    client_secret_env: GATEHOUSE_OIDC_CLIENT_SECRET
    redirect_uri: https://gatehouse.example.com/dashboard/oidc/callback
    scopes: [openid, groups]
    groups_claim: groups          # the ID token claim listing the person's groups
    roles:                        # directory group -> Gatehouse roles
      change-approvers: [approver]
      platform-oncall: [operator]
      engineers: [submitter]

The person is the ID token's ``sub`` (or ``identity_claim``), which must read as a
Gatehouse identity (lower-case letters, digits, ``.``, ``_``, ``:``, ``-``); their
roles are those of their groups, looked at when they sign in. The secret is never in
the file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts._base import Closed
from contracts.auth import Role

__all__ = ["OIDC_PREFIX", "OidcConfig", "OidcExchange", "OidcSession"]

# A session token opened by signing in with the identity provider begins with this
# (the rest is a random token whose digest names a row of ``dashboard_sessions``);
# a bearer token of the tokens file never does.
OIDC_PREFIX = "oidc."

SigningAlg = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"
]


_DEFAULT_ALGS: tuple[SigningAlg, ...] = ("RS256", "PS256", "ES256")


class OidcConfig(Closed):
    issuer: str = Field(pattern=r"^https?://[^\s?#]+$", max_length=2000)
    client_id: str = Field(min_length=1, max_length=255)
    client_secret_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")
    redirect_uri: str = Field(pattern=r"^https?://[^\s]+/dashboard/oidc/callback$", max_length=2000)
    scopes: list[str] = Field(default_factory=lambda: ["openid", "groups"], min_length=1)
    identity_claim: str = "sub"
    groups_claim: str = "groups"
    roles: dict[str, list[Role]] = Field(min_length=1)
    # Only these signature algorithms are taken (never "none", never a MAC).
    algorithms: list[SigningAlg] = Field(default_factory=lambda: list(_DEFAULT_ALGS), min_length=1)
    session_hours: float = Field(default=8, gt=0, le=24 * 7)
    # A public client for ``gatehouse login`` (device authorization); None: the CLI
    # keeps bearer tokens only.
    cli_client_id: str | None = Field(default=None, min_length=1, max_length=255)
    # How far the IdP's clock may be from the shim's when judging exp and iat.
    leeway_s: int = Field(default=60, ge=0, le=600)


class OidcExchange(Closed):
    """Body of ``POST /auth/oidc/exchange``: the ID token the CLI's sign-in got."""

    id_token: str = Field(min_length=10, max_length=16384)


class OidcSession(Closed):
    """A session opened for the person an ID token names: its bearer token (shown once)."""

    token: str
    identity: str
    roles: list[Role]
    expires_in_s: int
