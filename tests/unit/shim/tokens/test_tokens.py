"""Tokens that expire, are revoked and rotated; the file the CLI writes; the live store."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contracts import ErrorCode, GatehouseError, Role
from shim.tokens import (
    LiveTokens,
    TokenFileError,
    TokenStore,
    issue_token,
    parse_duration,
    read_tokens,
    revoke_token,
    rotate_token,
    state_of,
    token_digest,
)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def _refusal(store: TokenStore, token: str) -> GatehouseError:
    with pytest.raises(GatehouseError) as caught:
        store.check(token)
    return caught.value


def _old_format(path: Path, token: str) -> None:
    """A file as `gatehouse tokens add` wrote it before tokens could expire."""
    entry = {"identity": "legacy", "roles": ["operator"], "sha256": token_digest(token)}
    path.write_text(json.dumps({"schema_id": "ds.gatehouse_tokens_v1", "tokens": [entry]}))


def test_an_old_format_entry_loads_never_expires_and_keeps_its_id(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _old_format(path, "gh_old")
    far = Clock(T0 + timedelta(days=10_000))
    who = TokenStore.load(path, far).check("gh_old")
    derived = "tok_" + token_digest("gh_old")[:8]
    assert (who.name, who.roles, who.token_id) == ("legacy", frozenset({Role.OPERATOR}), derived)
    # a change to the file gives it that id for good, and leaves it working
    issue_token(path, "alice", [Role.SUBMITTER], expires_at=None)
    entries = read_tokens(path)
    assert entries[0].token_id == derived and entries[0].expires_at is None
    assert TokenStore.load(path, far).check("gh_old").token_id == derived


def test_expiry(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    clock = Clock()
    issued = issue_token(
        path, "alice", [Role.SUBMITTER], expires_at=T0 + timedelta(hours=1), clock=clock
    )
    store = TokenStore.load(path, clock)
    assert store.check(issued.token).token_id == issued.entry.token_id
    clock.at = T0 + timedelta(hours=1)  # expires_at itself is past
    refused = _refusal(store, issued.token)
    assert refused.code is ErrorCode.TOKEN_EXPIRED and refused.code.http_status == 401
    assert refused.details == {"token_id": issued.entry.token_id, "identity": "alice"}
    assert issued.token not in refused.message and issued.entry.sha256 not in refused.message
    assert store.identify(issued.token) is None
    assert _refusal(store, "gh_unknown").code is ErrorCode.UNAUTHORIZED


def test_revoke(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    clock = Clock()
    keep = issue_token(path, "bob", [Role.APPROVER], expires_at=None, clock=clock)
    gone = issue_token(path, "alice", [Role.SUBMITTER], expires_at=None, clock=clock)
    assert gone.entry.token_id is not None
    entry = revoke_token(path, gone.entry.token_id, clock=clock)
    assert entry.revoked_at == T0 and state_of(entry, T0) == "revoked"
    store = TokenStore.load(path, clock)
    refused = _refusal(store, gone.token)
    assert refused.code is ErrorCode.TOKEN_REVOKED
    assert refused.details["token_id"] == gone.entry.token_id
    assert store.check(keep.token).name == "bob"
    # revoking again changes nothing; an unknown id is named
    assert revoke_token(path, gone.entry.token_id, clock=Clock(T0 + timedelta(days=1))) == entry
    with pytest.raises(TokenFileError, match="no token tok_00000000"):
        revoke_token(path, "tok_00000000")


def test_rotate_with_grace(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    clock = Clock()
    old = issue_token(path, "alice", [Role.SUBMITTER, Role.OPERATOR], expires_at=None, clock=clock)
    assert old.entry.token_id is not None
    before, new = rotate_token(
        path, old.entry.token_id, grace=timedelta(minutes=5), expires_at=None, clock=clock
    )
    assert before.replaced_by == new.entry.token_id
    assert new.entry.identity == "alice" and new.entry.roles == old.entry.roles
    store = TokenStore.load(path, clock)
    clock.at = T0 + timedelta(minutes=4)  # in the grace: both work
    assert state_of(read_tokens(path)[0], clock.at) == "rotating"
    assert store.check(old.token).token_id == old.entry.token_id
    assert store.check(new.token).token_id == new.entry.token_id
    clock.at = T0 + timedelta(minutes=5)  # the grace is over: only the new one
    refused = _refusal(store, old.token)
    assert refused.code is ErrorCode.TOKEN_EXPIRED
    assert refused.details["replaced_by"] == new.entry.token_id
    assert "rotated" in refused.message
    assert store.check(new.token).name == "alice"
    assert state_of(read_tokens(path)[0], clock.at) == "rotated"
    with pytest.raises(TokenFileError, match="already rotated"):
        rotate_token(path, old.entry.token_id, grace=timedelta(0), expires_at=None, clock=clock)


def test_rotation_never_lengthens_a_life_and_a_revoked_token_is_not_rotated(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.json"
    clock = Clock()
    soon = T0 + timedelta(minutes=1)
    old = issue_token(path, "alice", [Role.SUBMITTER], expires_at=soon, clock=clock)
    assert old.entry.token_id is not None
    before, _ = rotate_token(
        path, old.entry.token_id, grace=timedelta(hours=1), expires_at=None, clock=clock
    )
    assert before.expires_at == soon
    other = issue_token(path, "bob", [Role.APPROVER], expires_at=None, clock=clock)
    assert other.entry.token_id is not None
    revoke_token(path, other.entry.token_id, clock=clock)
    with pytest.raises(TokenFileError, match="was revoked"):
        rotate_token(path, other.entry.token_id, grace=timedelta(0), expires_at=None, clock=clock)


def test_the_file_is_written_whole_and_private(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tokens.json"
    issued = issue_token(path, "alice", [Role.SUBMITTER], expires_at=None)
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == [".tokens.json.lock", "tokens.json"]
    text = path.read_text()
    assert issued.token not in text and issued.entry.sha256 in text


@pytest.mark.parametrize(
    ("text", "seconds"), [("90d", 90 * 86400), ("12h", 43200), ("45m", 2700), ("2w", 1209600)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "12", "h", "1.5h", "-1d", "3y"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_live_store_follows_the_file_at_most_once_a_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.json"
    first = issue_token(path, "alice", [Role.SUBMITTER], expires_at=None)
    ticks = Ticks()
    live = LiveTokens(path, monotonic=ticks)
    second = issue_token(path, "bob", [Role.APPROVER], expires_at=None)
    ticks.now += 0.5  # not looked at yet
    assert live.current().identify(second.token) is None
    ticks.now += 0.5
    assert live.current().check(second.token).name == "bob"
    assert first.entry.token_id is not None
    revoke_token(path, first.entry.token_id)
    ticks.now += 1
    assert _refusal(live.current(), first.token).code is ErrorCode.TOKEN_REVOKED

    # a broken file (or none) keeps the last good tokens, and says so
    good = path.read_bytes()
    path.write_text('{"tokens": [')
    ticks.now += 1
    with caplog.at_level(logging.ERROR, logger="gatehouse.shim.tokens"):
        assert live.current().check(second.token).name == "bob"
    assert "keeping the last good tokens" in caplog.text
    path.unlink()
    ticks.now += 1
    assert live.current().check(second.token).name == "bob"
    path.write_bytes(good.replace(b'"approver"', b'"operator"'))
    ticks.now += 1
    assert live.current().check(second.token).roles == frozenset({Role.OPERATOR})


def test_the_live_store_needs_a_good_file_at_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no tokens file"):
        LiveTokens.open(None)
    with pytest.raises(RuntimeError, match="no tokens file"):
        LiveTokens.open(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(RuntimeError, match="is invalid"):
        LiveTokens.open(tmp_path / "bad.json")
