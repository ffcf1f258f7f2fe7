"""The identity provider, as Gatehouse's relying party sees it (OpenID Connect): the
dashboard's sign-in (authorization code with PKCE, ``shim.api.dashboard.oidc``) and the
CLI's (device authorization; its ID token exchanged at ``POST /auth/oidc/exchange``).
A session either opens is a row of ``dashboard_sessions``; its token, ``oidc.`` and a
random string, is a session cookie on the dashboard or a bearer token on the API.

The provider's metadata and signing keys are read from its discovery document on
first use and kept; the keys are read again once when a token names a key id they
do not hold (the provider rotated). An ID token is taken only when joserfc verifies
its signature under one of those keys with an allowed algorithm (never ``none``,
never a MAC) and its ``iss``, ``aud``, ``exp``, ``iat``, ``sub`` and ``nonce`` hold;
anything else is ``oidc_token_invalid`` naming what failed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from contracts import (
    OIDC_PREFIX,
    ErrorCode,
    GatehouseError,
    JsonObject,
    OidcConfig,
    Role,
    load_settings_file,
    named_secret,
)
from ledger import Database, oidc
from shim.tokens import Identity

__all__ = [
    "OIDC_PREFIX",
    "IdentityProvider",
    "Person",
    "check_id_token",
    "oidc_identity",
    "open_oidc",
    "pkce_challenge",
    "provider_of",
]

_ROLES = {r.value for r in Role}
# How fresh an ID token the CLI brings must be (it has no nonce to tie it to a sign-in).
CLI_TOKEN_MAX_AGE_S = 300

_TIMEOUT_S = 10.0
_REFRESH_EVERY_S = 60.0
_IDENTITY = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,63}$")


def _unknown_key(raw: str, keys: KeySet) -> bool:
    """Whether the token's header names a key id the key set does not hold."""
    try:
        header = json.loads(base64.urlsafe_b64decode(raw.split(".", maxsplit=1)[0] + "=="))
        kid = header.get("kid") if isinstance(header, dict) else None
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(kid, str):
        return False
    try:
        keys.get_by_kid(kid)
    except JoseError:
        return True
    return False


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _invalid(reason: str) -> GatehouseError:
    return GatehouseError(
        ErrorCode.OIDC_TOKEN_INVALID, f"the sign-in was refused: {reason}", {"reason": reason}
    )


def oidc_identity(db: Database, token: str) -> Identity | None:
    """Who a session is, with the roles its sign-in gave (None: no such session, or
    it has ended)."""
    with db.engine.connect() as conn:
        found = oidc.find_session(conn, token.removeprefix(OIDC_PREFIX))
    if found is None:
        return None
    return Identity(found.identity, frozenset(Role(r) for r in found.roles if r in _ROLES))


def check_id_token(
    raw: str,
    keys: KeySet,
    config: OidcConfig,
    nonce: str | None,
    *,
    now: int | None = None,
    audience: str | None = None,
) -> JsonObject:
    """The ID token's claims, once its signature and claims hold (see the module).
    ``nonce`` None: a token with no sign-in of ours to tie it to (the CLI's device
    sign-in), taken only when issued within ``CLI_TOKEN_MAX_AGE_S``."""
    try:
        token = jwt.decode(raw, keys, algorithms=list(config.algorithms))
    except JoseError as exc:
        raise _invalid(f"the ID token does not verify ({exc.error}: {exc.description})") from exc
    except ValueError as exc:  # not a JWS at all
        raise _invalid("the ID token is not a signed JWT") from exc
    registry = JWTClaimsRegistry(
        now=now,
        leeway=config.leeway_s,
        iss={"essential": True, "value": config.issuer},
        aud={"essential": True, "value": audience or config.client_id},
        exp={"essential": True},
        iat={"essential": True},
        sub={"essential": True},
        nonce={"essential": True, "value": nonce} if nonce is not None else {"essential": False},
    )
    try:
        registry.validate(token.claims)
    except JoseError as exc:
        raise _invalid(f"{exc.error}: {exc.description}") from exc
    issued = token.claims.get("iat")
    moment = int(time.time()) if now is None else now
    if nonce is None and (
        not isinstance(issued, int) or moment - issued > CLI_TOKEN_MAX_AGE_S + config.leeway_s
    ):
        raise _invalid(f"the ID token was issued more than {CLI_TOKEN_MAX_AGE_S} s ago")
    claims: JsonObject = dict(token.claims)
    return claims


@dataclass(frozen=True)
class Person:
    identity: str
    roles: frozenset[Role]


@dataclass
class IdentityProvider:
    config: OidcConfig
    secret: str
    _meta: JsonObject = field(default_factory=dict)
    _keys: KeySet | None = None
    _refreshed: float = -_REFRESH_EVERY_S

    async def _get(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT_S, trust_env=False) as client:
                answer = await client.get(url)
            answer.raise_for_status()
            found = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise GatehouseError(
                ErrorCode.OIDC_UNAVAILABLE,
                f"the identity provider did not answer {url} as it should ({type(exc).__name__})",
            ) from exc
        if not isinstance(found, dict):
            raise GatehouseError(ErrorCode.OIDC_UNAVAILABLE, f"{url} is not a JSON object")
        return found

    async def metadata(self) -> JsonObject:
        if not self._meta:
            issuer = self.config.issuer.rstrip("/")
            meta = await self._get(f"{issuer}/.well-known/openid-configuration")
            if meta.get("issuer") != self.config.issuer:
                raise GatehouseError(
                    ErrorCode.OIDC_UNAVAILABLE,
                    f"the discovery document names issuer {meta.get('issuer')!r},"
                    f" not {self.config.issuer!r}",
                )
            self._meta = meta
        return self._meta

    async def keys(self, refresh: bool = False) -> KeySet:
        if self._keys is None or refresh:
            meta = await self.metadata()
            try:
                self._keys = KeySet.import_key_set(await self._get(str(meta["jwks_uri"])))  # type: ignore[arg-type]  # a JWKS document, checked by import_key_set
            except (KeyError, JoseError, ValueError) as exc:
                raise GatehouseError(
                    ErrorCode.OIDC_UNAVAILABLE, "the provider's signing keys do not load"
                ) from exc
        return self._keys

    async def authorize_url(self, state: str, nonce: str, verifier: str) -> str:
        meta = await self.metadata()
        query = urlencode({
            "response_type": "code", "client_id": self.config.client_id,
            "redirect_uri": self.config.redirect_uri, "scope": " ".join(self.config.scopes),
            "state": state, "nonce": nonce, "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
        })  # fmt: skip
        return f"{meta['authorization_endpoint']}?{query}"

    async def sign_in(self, code: str, verifier: str, nonce: str) -> Person:
        """Exchange the code for tokens, check the ID token, and say who this is."""
        meta = await self.metadata()
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT_S, trust_env=False) as client:
                answer = await client.post(
                    str(meta["token_endpoint"]),
                    data={"grant_type": "authorization_code", "code": code,
                          "redirect_uri": self.config.redirect_uri, "code_verifier": verifier},
                    auth=(self.config.client_id, self.secret),
                )  # fmt: skip
        except httpx.HTTPError as exc:
            raise GatehouseError(
                ErrorCode.OIDC_UNAVAILABLE, "the provider's token endpoint did not answer"
            ) from exc
        try:
            raw = answer.json().get("id_token") if answer.is_success else None
        except (ValueError, AttributeError):  # not a JSON object
            raw = None
        if not isinstance(raw, str):
            raise _invalid(f"the token endpoint answered HTTP {answer.status_code} and no ID token")
        return self.person(await self._claims(raw, nonce))

    async def cli_person(self, id_token: str) -> Person:
        """The person an ID token from the CLI's device sign-in names (audience: the
        OIDC file's ``cli_client_id``; fresh, as it has no nonce)."""
        audience = self.config.cli_client_id
        if audience is None:
            raise GatehouseError(
                ErrorCode.NOT_FOUND, "the OIDC file names no cli_client_id: the CLI uses tokens"
            )
        return self.person(await self._claims(id_token, None, audience))

    async def _claims(self, raw: str, nonce: str | None, audience: str | None = None) -> JsonObject:
        """``check_id_token`` under the provider's keys, read again first when the token
        names a key they lack (the provider rotated), at most every ``_REFRESH_EVERY_S``:
        tokens sent to name unknown keys cannot make the shim hammer the provider."""
        keys = await self.keys()
        if _unknown_key(raw, keys) and time.monotonic() - self._refreshed >= _REFRESH_EVERY_S:
            self._refreshed = time.monotonic()
            keys = await self.keys(refresh=True)
        return check_id_token(raw, keys, self.config, nonce, audience=audience)

    def person(self, claims: JsonObject) -> Person:
        name = claims.get(self.config.identity_claim)
        if not isinstance(name, str) or not _IDENTITY.fullmatch(name):
            raise _invalid(
                f"its {self.config.identity_claim} does not read as a Gatehouse identity"
                " (lower-case letters, digits, . _ : -; choose identity_claim in the OIDC file)"
            )
        groups = claims.get(self.config.groups_claim, [])
        listed = [groups] if isinstance(groups, str) else groups if isinstance(groups, list) else []
        roles = {r for g in listed if isinstance(g, str) for r in self.config.roles.get(g, [])}
        if not roles:
            raise GatehouseError(
                ErrorCode.FORBIDDEN,
                f"{name} signed in, but none of their groups gives a Gatehouse role",
                {"identity": name},
            )
        return Person(name, frozenset(roles))


def provider_of(state: object) -> IdentityProvider | None:
    """The shim's identity provider (``app.state.oidc``), None without an OIDC file."""
    found = getattr(state, "oidc", None)
    return found if isinstance(found, IdentityProvider) else None


def open_oidc(path: Path | None, env: dict[str, str] | None = None) -> IdentityProvider | None:
    """The provider of the OIDC file at ``path`` (None: no file, tokens only), or
    ``config_invalid``: a bad file, or the client secret's variable unset."""
    if path is None:
        return None
    config = load_settings_file(path, OidcConfig, "the OIDC file")
    secret = named_secret(path, "the OIDC file", config.client_secret_env, "the client secret", env)
    return IdentityProvider(config, secret)
