"""``gatehouse tokens``: expiry defaults, the listing, and each refusal's line and exit code."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shim.cli import build_parser, main
from shim.tokens import DEFAULT_LIFETIME, read_tokens
from tests.unit.shim.tokens.test_tokens import _old_format


def _cli(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(["tokens", *argv])
    return int(done.value.code or 0)


def test_cli_expiry_defaults_and_the_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "tokens.json")
    _old_format(Path(path), "gh_old")
    assert _cli("add", "alice", "--roles", "submitter", "--file", path) == 0
    token = capsys.readouterr().out.splitlines()[-1]
    assert _cli("add", "bob", "--roles", "approver", "--no-expiry", "--file", path) == 0
    assert _cli("add", "cy", "--roles", "operator", "--expires-in", "12h", "--file", path) == 0
    at = "2099-01-31T18:00"
    assert _cli("add", "di", "--roles", "operator", "--expires-at", at, "--file", path) == 0
    entries = read_tokens(Path(path))
    alice, bob, cy, di = entries[1:]
    assert alice.created_at is not None and alice.expires_at is not None
    assert alice.expires_at - alice.created_at == DEFAULT_LIFETIME
    assert bob.expires_at is None
    assert cy.expires_at is not None and cy.created_at is not None
    assert cy.expires_at - cy.created_at == timedelta(hours=12)
    assert di.expires_at == datetime(2099, 1, 31, 18, 0, tzinfo=UTC)
    assert bob.token_id is not None
    assert _cli("revoke", bob.token_id, "--file", path) == 0
    capsys.readouterr()

    assert _cli("list", "--file", path) == 0
    shown = capsys.readouterr().out
    assert token not in shown and all(e.sha256 not in shown for e in entries)
    assert "no expiry" in shown and "revoked" in shown and str(alice.token_id) in shown
    assert _cli("list", "--json", "--file", path) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["identity"], r["state"], r["expires"]) for r in rows][:3] == [
        ("legacy", "active", "no expiry"),
        ("alice", "active", rows[1]["expires"]),
        ("bob", "revoked", "no expiry"),
    ]


def test_cli_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "tokens.json")
    assert _cli("add", "a", "--roles", "admin", "--file", path) == 2
    assert not Path(path).exists()
    assert _cli("add", "a", "--roles", "operator", "--expires-in", "soon", "--file", path) == 2
    past = "2001-01-01T00:00Z"
    assert _cli("add", "a", "--roles", "operator", "--expires-at", past, "--file", path) == 2
    assert _cli("revoke", "tok_00000000", "--file", path) == 2
    assert _cli("list", "--file", path) == 2
    err = capsys.readouterr().err
    assert "unknown role 'admin'" in err and "is not a duration" in err
    assert "already past" in err and "no tokens file" in err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tokens", "add", "a", "--roles", "x", "--no-expiry",
                                   "--expires-in", "1d"])  # fmt: skip


def test_a_second_add_for_one_identity_is_refused_unless_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "tokens.json")
    assert _cli("add", "alice", "--roles", "submitter", "--file", path) == 0
    first = read_tokens(Path(path))[0]
    capsys.readouterr()

    assert _cli("add", "alice", "--roles", "approver", "--file", path) == 1
    err = capsys.readouterr().err
    assert f"alice already has a live token with other roles: {first.token_id} (submitter)" in err
    assert _cli("add", "alice", "--roles", "approver", "--another", "--file", path) == 1
    capsys.readouterr()

    assert _cli("add", "alice", "--roles", "submitter", "--file", path) == 1
    err = capsys.readouterr().err
    assert f"`gatehouse tokens rotate {first.token_id}`" in err and "--another" in err
    assert len(err.strip().splitlines()) == 1, err
    assert len(read_tokens(Path(path))) == 1  # nothing written by a refusal

    assert _cli("add", "alice", "--roles", "submitter", "--another", "--file", path) == 0
    assert _cli("revoke", str(first.token_id), "--file", path) == 0
    assert _cli("add", "bob", "--roles", "approver", "--file", path) == 0
    entries = read_tokens(Path(path))
    assert [e.identity for e in entries] == ["alice", "alice", "bob"]
    # once alice's live tokens are revoked, she may be given other roles
    for entry in entries[:2]:
        _cli("revoke", str(entry.token_id), "--file", path)
    assert _cli("add", "alice", "--roles", "approver", "--file", path) == 0


def test_what_the_tokens_refuse_exits_1_and_a_wrong_request_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every refusal that comes from the tokens already in the file (the request was
    well formed) is exit 1, FAILED; only a request that is wrong in itself is exit 2."""
    path = str(tmp_path / "tokens.json")
    assert _cli("add", "alice", "--roles", "submitter", "--file", path) == 0
    assert _cli("add", "bob", "--roles", "approver", "--file", path) == 0
    alice, bob = read_tokens(Path(path))
    assert _cli("rotate", str(alice.token_id), "--file", path) == 0
    assert _cli("revoke", str(bob.token_id), "--file", path) == 0
    capsys.readouterr()
    refused = {
        "a second token, same roles": ["add", "alice", "--roles", "submitter"],
        "a second token, other roles": ["add", "alice", "--roles", "operator", "--another"],
        "rotating a rotated token": ["rotate", str(alice.token_id)],
        "rotating a revoked token": ["rotate", str(bob.token_id)],
    }
    wrong = {
        "an unknown role": ["add", "cy", "--roles", "admin"],
        "a reserved identity": ["add", "system:x", "--roles", "operator"],
        "a bad duration": ["add", "cy", "--roles", "operator", "--expires-in", "soon"],
        "an unknown id": ["revoke", "tok_00000000"],
    }
    exits = {what: _cli(*argv, "--file", path) for what, argv in {**refused, **wrong}.items()}
    assert exits == {**dict.fromkeys(refused, 1), **dict.fromkeys(wrong, 2)}
