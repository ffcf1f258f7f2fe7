"""The Slack door without a database: its file, where it may reply, and the refusals
a request meets before anything is written (stale, forged, malformed headers)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.signature import SignatureVerifier

from contracts import ErrorCode, GatehouseError, Role, SlackConfig, TokenEntry
from shim.api.slack import SlackDoor, open_slack, verify
from shim.tokens import TokenStore, token_digest

SECRET = "slack-signing-secret-for-unit-tests"
NO_DB: Any = None  # every case here is refused before the database is asked


def _door(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> SlackDoor | None:
    file = tmp_path / "slack.yaml"
    file.write_text(text)
    return open_slack(file, {"SLACK_SECRET": SECRET} if env is None else env)


def test_no_file_no_door_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    assert open_slack(None) is None
    good = "signing_secret_env: SLACK_SECRET\nusers: {U0BOB: bob}\n"
    door = _door(tmp_path, good)
    assert door is not None and door.identity_of("U0BOB") == "bob"
    assert door.identity_of("U0EVE") is None
    cases: list[tuple[str, dict[str, str] | None, str]] = [
        (good, {}, "SLACK_SECRET"),  # the secret's variable is not set
        ("signing_secret_env: SLACK_SECRET\nusers: {}\n", None, "users"),
        ("signing_secret_env: SLACK_SECRET\nusers: {bob: bob}\n", None, "users"),
        ("users: {U0BOB: bob}\n", None, "signing_secret_env"),
        ("signing_secret_env: [", None, "not YAML"),
    ]
    for text, env, problem in cases:
        with pytest.raises(GatehouseError) as refused:
            _door(tmp_path, text, env)
        assert refused.value.code is ErrorCode.CONFIG_INVALID
        assert problem in refused.value.message, text


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.slack.com/actions/T0/1/abc", True),
        ("http://hooks.slack.com/actions/T0/1/abc", False),  # in clear, off loopback
        ("https://evil.example/actions", False),
        ("https://hooks.slack.com.evil.example/x", False),
        ("https://user@hooks.slack.com/x", False),
        ("http://127.0.0.1:9/x", True),  # listed below, and loopback
        ("http://127.0.0.1:10/x", False),  # another port: another host entry
    ],
)
def test_a_message_is_updated_only_on_a_response_host(url: str, ok: bool) -> None:
    config = SlackConfig(
        signing_secret_env="S", users={"U0BOB": "bob"},
        response_hosts=["hooks.slack.com", "127.0.0.1:9"],
    )  # fmt: skip
    door = SlackDoor(config, SignatureVerifier(SECRET))
    assert door.may_reply_to(url) is ok


def _headers(body: bytes, at: float, secret: str = SECRET) -> dict[str, str]:
    stamp = str(int(at))
    signed = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return {"x-slack-request-timestamp": stamp, "x-slack-signature": str(signed)}


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, ErrorCode.SLACK_SIGNATURE_INVALID),
        ({"x-slack-request-timestamp": "soon", "x-slack-signature": "v0=1"},
         ErrorCode.SLACK_SIGNATURE_INVALID),
        ({"x-slack-request-timestamp": "9" * 5000, "x-slack-signature": "v0=1"},
         ErrorCode.SLACK_SIGNATURE_INVALID),
        ({"x-slack-request-timestamp": "\u0661\u0662", "x-slack-signature": "v0=1"},
         ErrorCode.SLACK_SIGNATURE_INVALID),  # digits, but not ASCII ones
        ("stale", ErrorCode.SLACK_REQUEST_STALE),
        ("future", ErrorCode.SLACK_REQUEST_STALE),
        ("forged", ErrorCode.SLACK_SIGNATURE_INVALID),
        ("not utf-8", ErrorCode.SLACK_SIGNATURE_INVALID),
    ],
)  # fmt: skip
def test_a_request_that_is_not_slacks_or_not_recent_is_refused(
    tmp_path: Path, headers: Any, code: ErrorCode
) -> None:
    door = _door(tmp_path, "signing_secret_env: SLACK_SECRET\nusers: {U0BOB: bob}\n")
    assert door is not None
    body = b"payload=%7B%7D"
    now = time.time()
    made = {
        "stale": lambda: _headers(body, now - 301),
        "future": lambda: _headers(body, now + 301),
        "forged": lambda: _headers(body, now, "another-secret"),
        "not utf-8": lambda: _headers(body, now),
    }
    sent = made[headers]() if isinstance(headers, str) else headers
    if headers == "not utf-8":
        body = b"\xff\xfe" + body
    with pytest.raises(GatehouseError) as refused:
        verify(door, NO_DB, body, sent)
    assert refused.value.code is code


def test_an_identity_acts_through_slack_with_the_roles_of_its_live_tokens() -> None:
    def entry(name: str, roles: list[Role], token: str, **life: Any) -> TokenEntry:
        return TokenEntry(identity=name, roles=roles, sha256=token_digest(token), **life)

    past = "2000-01-01T00:00:00Z"
    store = TokenStore([
        entry("bob", [Role.APPROVER], "t1"),
        entry("bob", [Role.OPERATOR], "t2", revoked_at=past),
        entry("olga", [Role.APPROVER], "t3", expires_at=past),
    ])  # fmt: skip
    bob = store.named("bob")
    assert bob is not None and bob.roles == frozenset({Role.APPROVER})
    assert store.named("olga") is None  # her only token expired
    assert store.named("nobody") is None
