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
from shim.api.idp import IdentityProvider, check_id_token, id_token_key

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
    listed = _signed(_claims(aud=["other", "gatehouse"], azp="gatehouse"))
    assert check_id_token(listed, KEYS, CONFIG, "n1")["sub"] == "bob"  # several, issued to us


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


@pytest.mark.parametrize(
    ("aud", "azp", "taken"),
    [
        ("gatehouse", None, True),  # one audience, no azp: as most providers send it
        ("gatehouse", "gatehouse", True),
        (["gatehouse"], None, True),  # a list of one is one audience
        (["gatehouse", "other"], "gatehouse", True),
        (["gatehouse", "other"], None, False),  # several audiences and no azp
        (["other", "gatehouse"], "other", False),  # issued to another client, shown to us
        ("gatehouse", "other", False),  # azp there and not us
        ("gatehouse", "", False),
        ("gatehouse", ["gatehouse"], False),  # azp is one string, not a list
    ],
)
def test_azp_is_checked_as_openid_connect_core_3_1_3_7_says(
    aud: str | list[str], azp: object, taken: bool
) -> None:
    """Points 4 and 5: several audiences need an azp; an azp must be our client id.
    The same holds for the CLI's client, with its own id as the audience."""
    for audience, ours in ((None, "gatehouse"), ("gatehouse-cli", "gatehouse-cli")):
        mine = [ours if a == "gatehouse" else a for a in aud] if isinstance(aud, list) else ours
        party = ours if azp == "gatehouse" else azp
        token = _signed(_claims(aud=mine, azp=party, nonce=None if audience else "n1"))
        nonce = None if audience else "n1"
        if taken:
            check_id_token(token, KEYS, CONFIG, nonce, audience=audience)
            continue
        with pytest.raises(GatehouseError) as refused:
            check_id_token(token, KEYS, CONFIG, nonce, audience=audience)
        assert refused.value.code is ErrorCode.OIDC_TOKEN_INVALID
        assert "azp" in refused.value.message


def _other_padding(raw: str) -> str:
    """The same token with the unused low bits of its signature's last character set
    otherwise: another text, the same bytes once decoded."""
    head, payload, signature = raw.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    unused = {2: 0b1111, 3: 0b11}.get(len(signature) % 4, 0)
    assert unused, "a signature whose length leaves no unused bits"
    last = alphabet.index(signature[-1])
    flipped = alphabet[(last & ~unused) | (~last & unused)]
    return f"{head}.{payload}.{signature[:-1]}{flipped}"


def test_one_id_token_has_one_single_use_key_however_it_is_written() -> None:
    claims = _claims()
    raw = _signed(claims)
    again = _other_padding(raw)
    assert again != raw
    assert id_token_key(again, claims) == id_token_key(raw, claims)
    other = _signed(_claims(iat=NOW - 1))
    assert id_token_key(other, _claims(iat=NOW - 1)) != id_token_key(raw, claims)
    # with a jti, the issuer and jti name it, whatever the text
    with_jti = _claims(jti="j-1")
    assert id_token_key(_signed(with_jti), with_jti) == id_token_key(again, with_jti)
    assert id_token_key(raw, with_jti) != id_token_key(raw, _claims(jti="j-2"))
    assert id_token_key(raw, with_jti) != id_token_key(raw, _claims(jti="j-1", iss="https://b"))
