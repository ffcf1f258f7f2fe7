"""The relying party's checks on an ID token, without a provider: tokens made here
with joserfc, each wrong in one way, are refused with ``oidc_token_invalid``."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from contracts import ErrorCode, GatehouseError, OidcConfig, Role
from shim.api.idp import IdentityProvider, check_id_token

CONFIG = OidcConfig(
    issuer="https://idp.example", client_id="gatehouse", client_secret_env="S",
    redirect_uri="https://gh.example/dashboard/oidc/callback",
    roles={"approvers": [Role.APPROVER], "oncall": [Role.OPERATOR]},
)  # fmt: skip
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet([KEY])
NOW = int(time.time())


def _claims(**changed: Any) -> dict[str, Any]:
    claims = {"iss": "https://idp.example", "aud": "gatehouse", "sub": "bob", "nonce": "n1",
              "iat": NOW, "exp": NOW + 300, "groups": ["approvers"]}  # fmt: skip
    claims.update(changed)
    return {k: v for k, v in claims.items() if v is not None}


def _signed(claims: dict[str, Any], key: Any = KEY, alg: str = "RS256") -> str:
    return jwt.encode({"alg": alg, "kid": "k1"}, claims, key)


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def test_a_good_token_gives_its_claims_and_the_person() -> None:
    claims = check_id_token(_signed(_claims()), KEYS, CONFIG, "n1")
    assert claims["sub"] == "bob"
    person = IdentityProvider(CONFIG, "secret").person(claims)
    assert (person.identity, person.roles) == ("bob", frozenset({Role.APPROVER}))
    listed = check_id_token(_signed(_claims(aud=["other", "gatehouse"])), KEYS, CONFIG, "n1")
    assert listed["sub"] == "bob"  # an audience list that names us


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (_signed(_claims(aud="someone-else")), "aud"),
        (_signed(_claims(iss="https://evil.example")), "iss"),
        (_signed(_claims(exp=NOW - 3600, iat=NOW - 7200)), "exp"),
        (_signed(_claims(nonce="n2")), "nonce"),  # a token minted for another sign-in
        (_signed(_claims(nonce=None)), "nonce"),
        (_signed(_claims(sub=None)), "sub"),
        (_signed(_claims(), RSAKey.generate_key(2048, parameters={"kid": "k1"})), "signature"),
        (_b64({"alg": "none", "kid": "k1"}) + "." + _b64(_claims()) + ".", "alg: none"),
        (_signed(_claims(), OctKey.import_key(b"x" * 32), "HS256"), "a MAC"),
        ("not-a-token", "garbage"),
    ],
)
def test_a_token_wrong_in_one_way_is_refused(token: str, why: str) -> None:
    with pytest.raises(GatehouseError) as refused:
        check_id_token(token, KEYS, CONFIG, "n1")
    assert refused.value.code is ErrorCode.OIDC_TOKEN_INVALID, why


def test_an_identity_that_cannot_be_gatehouses_or_has_no_role_is_refused() -> None:
    idp = IdentityProvider(CONFIG, "secret")
    with pytest.raises(GatehouseError) as odd:
        idp.person(_claims(sub="Bob@Example.com"))
    assert odd.value.code is ErrorCode.OIDC_TOKEN_INVALID
    with pytest.raises(GatehouseError) as none:
        idp.person(_claims(groups=["visitors"]))
    assert none.value.code is ErrorCode.FORBIDDEN
    assert idp.person(_claims(groups="oncall")).roles == frozenset({Role.OPERATOR})


def test_tokens_naming_unknown_keys_refresh_the_keys_at_most_once_a_minute() -> None:
    """A token signed by a key the shim has not seen (the provider rotated) makes it read
    the provider's keys again; a flood of such tokens does so once, not per token."""
    import asyncio

    idp = IdentityProvider(CONFIG, "secret")
    fetched: list[bool] = []

    async def keys(refresh: bool = False) -> KeySet:
        fetched.append(refresh)
        return KEYS

    idp.keys = keys  # type: ignore[method-assign]  # the provider's keys, without a provider
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    token = jwt.encode({"alg": "RS256", "kid": "k2"}, _claims(), stranger)
    for _ in range(3):
        with pytest.raises(GatehouseError):
            asyncio.run(idp._claims(token, "n1"))
    assert fetched.count(True) == 1
    assert asyncio.run(idp._claims(_signed(_claims()), "n1"))["sub"] == "bob"  # known key: no fetch
    assert fetched.count(True) == 1
