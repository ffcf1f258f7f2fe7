"""``gatehouse logout`` and ``POST /auth/oidc/logout``: a session a sign-in opened is
ended on the server (its row deleted), and its token is refused at once; a token of
the tokens file, or a session that has ended, is told so. The session is opened
through the ledger as a sign-in would (the sign-in itself, against a real provider,
is tests/integration/test_oidc.py). Both databases."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import oidc, open_database
from tests.conftest import require_backend
from tests.support.served import ServedShim
from tests.support.stack import BACKENDS, Stack, running_stack

GATEHOUSE = str(Path(sys.executable).parent / "gatehouse")


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path_factory.mktemp(f"logout-{request.param}")) as s:
        yield s


def _session(stack: Stack, identity: str, roles: list[str]) -> str:
    """A session token, as the sign-in would open one for ``identity``."""
    token = secrets.token_urlsafe(32)
    db = open_database(stack.database_url)
    try:
        with db.engine.begin() as conn:
            oidc.start_session(conn, token, oidc.Session(identity, roles),
                               issuer="https://login.test", hours=1)  # fmt: skip
    finally:
        db.dispose()
    return f"oidc.{token}"


def _rows(stack: Stack, identity: str) -> int:
    found = stack.sql("SELECT COUNT(*) FROM dashboard_sessions WHERE identity = :i", i=identity)
    return int(found[0][0])


def test_logout_ends_the_session_and_its_token_is_refused_at_once(stack: Stack) -> None:
    token = _session(stack, "bea", ["approver"])
    other = _session(stack, "bea", ["approver"])  # another sign-in of the same person
    bearer = {"Authorization": f"Bearer {token}"}
    assert stack.client.get("/runs", headers=bearer).status_code == 200
    assert _rows(stack, "bea") == 2

    out = stack.client.post("/auth/oidc/logout", headers=bearer)
    assert out.status_code == 200, out.text
    assert out.json() == {"ended": True, "identity": "bea"}
    assert _rows(stack, "bea") == 1  # this session only; the other sign-in stays
    refused = stack.client.get("/runs", headers=bearer)
    assert refused.status_code == 401 and "session has ended" in refused.text
    assert (
        stack.client.get("/runs", headers={"Authorization": f"Bearer {other}"}).status_code == 200
    )

    again = stack.client.post("/auth/oidc/logout", headers=bearer)
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "unauthorized"


def test_a_token_of_the_tokens_file_is_not_logged_out(stack: Stack) -> None:
    bearer = stack.client.people.auth("bob")
    r = stack.client.post("/auth/oidc/logout", headers=bearer)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    assert "gatehouse tokens revoke" in r.json()["error"]["message"]
    assert stack.client.get("/runs", headers=bearer).status_code == 200  # still works
    anonymous = stack.client.post("/auth/oidc/logout", headers={"Authorization": ""})
    assert anonymous.status_code == 401


def _cli(url: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATEHOUSE_URL": url, "GATEHOUSE_TOKEN": token}
    return subprocess.run([GATEHOUSE, "logout"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip


def test_gatehouse_logout_from_a_terminal(stack: Stack) -> None:
    token = _session(stack, "cid", ["submitter"])
    with ServedShim(stack.database_url, stack.client.people.file) as url:
        done = _cli(url, token)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "signed out: the session of cid has ended (unset GATEHOUSE_TOKEN)\n"
        assert _rows(stack, "cid") == 0
        twice = _cli(url, token)
        assert twice.returncode == 1
        assert "the session had already ended" in twice.stderr and twice.stdout == ""
        machine = _cli(url, stack.client.people.tokens["bob"])
        assert machine.returncode == 2
        assert "not a session from `gatehouse login`" in machine.stderr
