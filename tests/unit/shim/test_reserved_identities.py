"""No person takes a name Gatehouse records as its own actor, through any door.

Every reserved name and prefix of ``contracts.identities`` (read from that one
declaration) meets every way an identity is made: ``gatehouse tokens add``, the
tokens file functions (add, rotate), a tokens file written by hand (loaded at start,
or followed live), an OIDC sign-in (the dashboard's and the CLI's, both through
``IdentityProvider.person``) and a Slack mapping. Each refuses it; an ordinary name
is still taken. Spellings that fold to a reserved name (case, white space, a
full-width colon, an invisible character) are refused too.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from slack_sdk.signature import SignatureVerifier

from contracts import (
    POLICY_ACTOR_PREFIX,
    RESERVED_NAMES,
    RESERVED_PREFIXES,
    ErrorCode,
    GatehouseError,
    OidcConfig,
    Role,
    SlackConfig,
    TokenEntry,
    reserved_identity,
)
from shim.api.idp import IdentityProvider, Person
from shim.api.slack import SlackDoor, open_slack
from shim.cli import main
from shim.tokens import (
    LiveTokens,
    TokenFileError,
    TokenStore,
    add_token,
    issue_token,
    read_tokens,
    rotate_token,
    token_digest,
)

# One identity per reserved entry: the name itself, or a name under the prefix.
RESERVED = sorted(RESERVED_NAMES) + [p + "x" for p in RESERVED_PREFIXES]
# What automatic approvals are recorded as, and the examiner's names.
RESERVED += ["policy:auto-read-only", "policy:default"]
# Spellings that fold to a reserved name; the identity grammar refuses them too.
LOOKALIKES = [
    "Policy:x",
    "POLICY:default",
    " policy:x",
    "policy:x ",
    "policy\uff1ax",  # FULLWIDTH COLON
    "\uff50olicy:x",  # FULLWIDTH SMALL P
    "po\u200blicy:x",  # ZERO WIDTH SPACE
    "\u00adpolicy:x",  # SOFT HYPHEN
    "DBOS",
    "Anonymous",
    "Gatehouse-Shim",
    "SYSTEM:reaper",
    "Worker-1",
]
ORDINARY = ["alice", "policy", "policyholder", "system", "dbos-admin", "workers", "bob.smith"]

SECRET = "slack-signing-secret-for-unit-tests"
CONFIG = OidcConfig(
    issuer="https://idp.example", client_id="gatehouse", client_secret_env="S",
    redirect_uri="https://gh.example/dashboard/oidc/callback",
    roles={"approvers": [Role.APPROVER]}, cli_client_id="gatehouse-cli",
)  # fmt: skip
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})


def _entry(identity: str, token: str = "gh_hand_written") -> TokenEntry:
    return TokenEntry.model_construct(  # as a hand edit may leave it, unchecked
        identity=identity, roles=[Role.APPROVER], sha256=token_digest(token),
        token_id="tok_0000beef", created_at=None, expires_at=None, revoked_at=None,
        replaced_by=None,
    )  # fmt: skip


def _hand_written(path: Path, identity: str) -> None:
    path.write_text(json.dumps({"tokens": [_entry(identity).model_dump(mode="json")]}))


def _cli(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(["tokens", *argv])
    return int(done.value.code or 0)


def test_the_rule_folds_case_width_white_space_and_invisible_characters() -> None:
    for name in RESERVED + LOOKALIKES:
        assert reserved_identity(name) is not None, name
    for name in ORDINARY:
        assert reserved_identity(name) is None, name
    assert reserved_identity("policy:auto-read-only") == POLICY_ACTOR_PREFIX


@pytest.mark.parametrize("name", RESERVED + LOOKALIKES)
def test_no_token_is_made_for_a_reserved_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tokens.json"
    assert _cli("add", name, "--roles", "approver", "--file", str(path)) == 2
    said = capsys.readouterr().err
    assert repr(name) in said and "its own actor" in said, said
    assert not path.exists()  # refused before the file was touched
    with pytest.raises(TokenFileError):
        issue_token(path, name, [Role.APPROVER], expires_at=None)
    with pytest.raises(TokenFileError):
        add_token(path, name, [Role.SUBMITTER])
    assert not path.exists()


@pytest.mark.parametrize("name", RESERVED)
def test_a_reserved_name_in_a_tokens_file_written_by_hand_is_refused(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.json"
    _hand_written(path, name)
    with pytest.raises(RuntimeError, match="Gatehouse records as its own actor"):
        TokenStore.load(path)
    with pytest.raises(RuntimeError, match="Gatehouse records as its own actor"):
        TokenStore([_entry(name)])
    with pytest.raises(RuntimeError):
        LiveTokens(path)  # the shim does not start on it
    with pytest.raises(TokenFileError, match="Gatehouse records as its own actor"):
        rotate_token(path, "tok_0000beef", grace=timedelta(0), expires_at=None)
    assert [e.identity for e in read_tokens(path)] == [name]  # the file is as it was


@pytest.mark.parametrize("name", RESERVED)
def test_a_running_shim_keeps_its_tokens_when_the_file_gains_a_reserved_name(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.json"
    alice = add_token(path, "alice", [Role.APPROVER])
    ticks = [0.0]
    live = LiveTokens(path, monotonic=lambda: ticks[0])
    entries = [*read_tokens(path), _entry(name)]
    path.write_text(json.dumps({"tokens": [e.model_dump(mode="json") for e in entries]}))
    ticks[0] += 5
    store = live.current()
    assert store.identify("gh_hand_written") is None
    assert store.check(alice).name == "alice"
    assert store.named(name) is None


def _claims(sub: str, **more: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": CONFIG.issuer, "aud": "gatehouse-cli", "sub": sub, "iat": now,
            "exp": now + 300, "groups": ["approvers"], **more}  # fmt: skip


def _cli_sign_in(idp: IdentityProvider, claims: dict[str, Any]) -> Person:
    async def keys(refresh: bool = False) -> KeySet:
        return KeySet([KEY])

    idp.keys = keys  # type: ignore[method-assign]  # the provider's keys, without a provider
    raw = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, KEY)
    return asyncio.run(idp.cli_person(raw))


@pytest.mark.parametrize("name", RESERVED)
def test_no_oidc_sign_in_becomes_a_reserved_name(name: str) -> None:
    idp = IdentityProvider(CONFIG, "secret")
    with pytest.raises(GatehouseError) as refused:
        idp.person(_claims(name))  # the dashboard's sign-in and the CLI's both end here
    assert refused.value.code is ErrorCode.IDENTITY_RESERVED
    assert "Gatehouse records as its own actor" in refused.value.message
    with pytest.raises(GatehouseError) as through_the_cli:
        _cli_sign_in(idp, _claims(name))
    assert through_the_cli.value.code is ErrorCode.IDENTITY_RESERVED
    other = IdentityProvider(
        CONFIG.model_copy(update={"identity_claim": "preferred_username"}), "s"
    )
    with pytest.raises(GatehouseError) as by_claim:
        other.person(_claims("bob", preferred_username=name))
    assert by_claim.value.code is ErrorCode.IDENTITY_RESERVED


@pytest.mark.parametrize("name", LOOKALIKES)
def test_no_oidc_sign_in_becomes_a_look_alike_of_one(name: str) -> None:
    with pytest.raises(GatehouseError) as refused:
        IdentityProvider(CONFIG, "secret").person(_claims(name))
    assert refused.value.code in (ErrorCode.IDENTITY_RESERVED, ErrorCode.OIDC_TOKEN_INVALID)


@pytest.mark.parametrize("name", RESERVED)
def test_no_slack_user_is_mapped_to_a_reserved_name(name: str, tmp_path: Path) -> None:
    file = tmp_path / "slack.json"
    file.write_text(json.dumps({"signing_secret_env": "SLACK_SECRET",
                                "users": {"U0BOB": "bob", "U0EVE": name}}))  # fmt: skip
    with pytest.raises(GatehouseError) as refused:
        open_slack(file, {"SLACK_SECRET": SECRET})
    assert refused.value.code is ErrorCode.CONFIG_INVALID
    assert "U0EVE" in refused.value.message and "its own actor" in refused.value.message
    # a door made without the file's check still maps nobody to it
    config = SlackConfig(signing_secret_env="SLACK_SECRET", users={"U0EVE": name})
    assert SlackDoor(config, SignatureVerifier(SECRET)).identity_of("U0EVE") is None


@pytest.mark.parametrize("name", LOOKALIKES)
def test_no_slack_user_is_mapped_to_a_look_alike_of_one(name: str, tmp_path: Path) -> None:
    file = tmp_path / "slack.json"
    file.write_text(json.dumps({"signing_secret_env": "SLACK_SECRET", "users": {"U0EVE": name}}))
    with pytest.raises(GatehouseError) as refused:
        open_slack(file, {"SLACK_SECRET": SECRET})
    assert refused.value.code is ErrorCode.CONFIG_INVALID


def test_ordinary_names_are_still_taken_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    idp = IdentityProvider(CONFIG, "secret")
    for n, name in enumerate(ORDINARY):
        token = add_token(path, name, [Role.APPROVER])
        assert TokenStore.load(path).check(token).name == name
        assert idp.person(_claims(name)).identity == name
        file = tmp_path / f"slack-{n}.json"
        file.write_text(json.dumps({"signing_secret_env": "SLACK_SECRET",
                                    "users": {"U0BOB": name}}))  # fmt: skip
        door = open_slack(file, {"SLACK_SECRET": SECRET})
        assert door is not None and door.identity_of("U0BOB") == name
    assert _cli_sign_in(idp, _claims("alice")).identity == "alice"
