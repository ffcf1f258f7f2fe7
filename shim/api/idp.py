"""The identity provider, as Gatehouse's relying party sees it (OpenID Connect): the
dashboard's sign-in (authorization code with PKCE, ``shim.api.dashboard.oidc``) and the
CLI's (device authorization; its ID token exchanged at ``POST /auth/oidc/exchange``).
A session either opens is a row of ``dashboard_sessions``; its token, ``oidc.`` and a
random string, is a session cookie on the dashboard or a bearer token on the API.

The provider's metadata and signing keys are read from its discovery document on
first use and kept; the keys are read again once when a token names a key id they
do not hold (the provider rotated). An ID token is taken only when joserfc verifies
its signature under one of those keys with an allowed algorithm (never ``none``,
never a MAC) and its ``iss``, ``aud``, ``azp``, ``exp``, ``iat``, ``sub`` and ``nonce``
hold; anything else is ``oidc_token_invalid`` naming what failed. ``azp`` as OpenID
Connect Core 3.1.3.7 has it: a token for several audiences must name us as the party
it was issued to, and a token that names one must name us.

An ID token opens one session, once: the exchange records its ``jti`` (or, without
one, a digest of the token as signed) until it expires, and a second exchange of it
is ``oidc_token_replayed``. A name Gatehouse records as its own actor
(``contracts.identities``) is no person's identity: ``identity_reserved``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field, replace
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
from shim.tokens import Identity, refuse_reserved, reserved_reason

__all__ = [
    "OIDC_PREFIX",
    "IdentityProvider",
    "Person",
    "check_id_token",
    "id_token_key",
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
    if found is None or reserved_reason(found.identity) is not None:
        return None  # a session opened before the name was reserved is no session
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
    _check_azp(token.claims, audience or config.client_id)
    issued = token.claims.get("iat")
    moment = int(time.time()) if now is None else now
    if nonce is None and (
        not isinstance(issued, int) or moment - issued > CLI_TOKEN_MAX_AGE_S + config.leeway_s
    ):
        raise _invalid(f"the ID token was issued more than {CLI_TOKEN_MAX_AGE_S} s ago")
    claims: JsonObject = dict(token.claims)
    return claims


def _check_azp(claims: dict[str, Any], client_id: str) -> None:
    """OpenID Connect Core 3.1.3.7, points 4 and 5: with several audiences ``azp``
    must be there; when there, it must be our client id. Either way a token issued
    to another client, and only shown to us, is refused."""
    aud = claims.get("aud")
    several = isinstance(aud, list) and len(aud) > 1
    azp = claims.get("azp")
    if azp is None and several:
        raise _invalid("the ID token names several audiences but no azp (authorized party)")
    if azp is not None and azp != client_id:
        raise _invalid(f"the ID token was issued to another client (azp {str(azp)[:100]!r})")


def id_token_key(raw: str, claims: JsonObject) -> str:
    """What names one ID token for its single use: its issuer and ``jti`` when it has
    one; else its signed part and its signature's bytes. The bytes, not their base64
    text: a signature written with other unused padding bits is the same signature,
    so it cannot make the same token count as a new one."""
    jti = claims.get("jti")
    if isinstance(jti, str) and jti:
        named = f"jti\n{claims.get('iss')}\n{jti}".encode()
    else:
        signed, _, signature = raw.rpartition(".")
        try:
            sig = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        except ValueError as exc:  # it verified, so this does not happen
            raise _invalid("the ID token's signature is not base64url") from exc
        named = b"token\n" + signed.encode("utf-8") + b"." + sig
    return hashlib.sha256(named).hexdigest()


@dataclass(frozen=True)
class Person:
    identity: str
    roles: frozenset[Role]
    # The ID token it came with: its single-use key (``id_token_key``) and its
    # ``exp``, until when that key is kept. None: a person not made from a token.
    token_key: str | None = None
    token_expires: int | None = None


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
        return self._person_of(raw, await self._claims(raw, nonce))

    async def cli_person(self, id_token: str) -> Person:
        """The person an ID token from the CLI's device sign-in names (audience: the
        OIDC file's ``cli_client_id``; fresh, as it has no nonce)."""
        audience = self.config.cli_client_id
        if audience is None:
            raise GatehouseError(
                ErrorCode.NOT_FOUND, "the OIDC file names no cli_client_id: the CLI uses tokens"
            )
        return self._person_of(id_token, await self._claims(id_token, None, audience))

    def _person_of(self, raw: str, claims: JsonObject) -> Person:
        found = self.person(claims)
        exp = claims.get("exp")
        finite = isinstance(exp, int | float) and math.isfinite(exp)
        expires = int(exp) if finite and isinstance(exp, int | float) else None
        return replace(found, token_key=id_token_key(raw, claims), token_expires=expires)

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
        refuse_reserved(name)
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
