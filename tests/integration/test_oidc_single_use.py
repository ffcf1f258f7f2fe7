"""One ID token, one session; no sign-in as a name Gatehouse records as its own actor.
With a real OpenID Provider (panva's oidc-provider, as in ``test_oidc.py``), on both
databases.

* An ID token from the CLI's device sign-in, exchanged twice (the examiner's probe:
  two independent sessions, logging out of one left the other), opens one session;
  the second exchange is ``oidc_token_replayed``, recorded as a security event, and
  stays refused after the first session ends.
* An account named like an automatic approval (``policy:auto-read-only``) signs in to
  the dashboard and from the terminal: both ``identity_reserved``, no session; a
  session row with such a name, left from before, is no session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.conftest import require_backend
from tests.integration.oidc_stack import signed_stack
from tests.support.oidc_provider import OidcProvider
from tests.support.stack import BACKENDS, Stack

CALLBACK = "http://testserver/dashboard/oidc/callback"
RESERVED = "policy:auto-read-only"
ACCOUNTS = {"bob": ["change-approvers"], "carol": ["change-approvers"],
            RESERVED: ["change-approvers"]}  # fmt: skip
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture(params=BACKENDS)
def signed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Stack, OidcProvider]]:
    require_backend(request.param)
    with signed_stack(
        request.param, tmp_path, CALLBACK, ACCOUNTS, {"change-approvers": ["approver"]}
    ) as found:
        yield found


def _cli_id_token(idp: OidcProvider, login: str) -> str:
    """An ID token for the CLI's client, as ``gatehouse login`` gets one: the device
    sign-in, confirmed by ``login`` in a browser, then the token endpoint once."""
    meta = httpx.get(f"{idp.issuer}/.well-known/openid-configuration", timeout=10).json()
    device = httpx.post(str(meta["device_authorization_endpoint"]),
                        data={"client_id": "gatehouse-cli", "scope": "openid groups"},
                        timeout=10).json()  # fmt: skip
    assert "Sign-in Success" in idp.confirm_device(device["verification_uri_complete"], login)
    answer = httpx.post(str(meta["token_endpoint"]),
                        data={"grant_type": DEVICE_GRANT, "client_id": "gatehouse-cli",
                              "device_code": device["device_code"]}, timeout=10)  # fmt: skip
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id_token"])


def _events(stack: Stack, code: str) -> int:
    found = stack.sql("SELECT COUNT(*) FROM security_events WHERE error_code = :c", c=code)
    return int(found[0][0])


def test_an_id_token_opens_one_session_once(signed: tuple[Stack, OidcProvider]) -> None:
    stack, idp = signed
    id_token = _cli_id_token(idp, "bob")
    first = stack.client.post("/auth/oidc/exchange", json={"id_token": id_token})
    assert first.status_code == 200, first.text
    session = first.json()["token"]
    again = stack.client.post("/auth/oidc/exchange", json={"id_token": id_token})
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "oidc_token_replayed"
    assert stack.sql("SELECT identity FROM dashboard_sessions") == [("bob",)]
    assert _events(stack, "oidc_token_replayed") == 1
    kept = stack.sql("SELECT token_sha256, identity FROM oidc_id_tokens")
    assert len(kept) == 1 and kept[0][1] == "bob"
    assert id_token not in json.dumps(stack.sql("SELECT * FROM oidc_id_tokens"))

    bearer = {"Authorization": f"Bearer {session}"}
    assert stack.client.post("/auth/oidc/logout", headers=bearer).status_code == 200
    after = stack.client.post("/auth/oidc/exchange", json={"id_token": id_token})
    assert after.status_code == 409 and after.json()["error"]["code"] == "oidc_token_replayed"
    assert stack.sql("SELECT COUNT(*) FROM dashboard_sessions")[0][0] == 0

    # A token's row stays only while the token could be taken: rows past their expiry
    # go when the next sign-in is recorded; another sign-in is another token. (Not bob
    # again: this provider's ID tokens carry no jti, and two of one person's issued in
    # the same second are the same bytes, which is the same token.)
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat(timespec="milliseconds")
    stack.execute(
        "INSERT INTO oidc_id_tokens (token_sha256, identity, used_at, expires_at)"
        " VALUES (:k, 'bob', :t, :t)",
        k="0" * 64, t=past.replace("+00:00", "Z"),
    )  # fmt: skip
    carol = _cli_id_token(idp, "carol")
    fresh = stack.client.post("/auth/oidc/exchange", json={"id_token": carol})
    assert fresh.status_code == 200, fresh.text
    left = stack.sql("SELECT token_sha256 FROM oidc_id_tokens")
    assert len(left) == 2 and ("0" * 64,) not in left


def test_an_account_named_like_the_policy_signs_in_nowhere(
    signed: tuple[Stack, OidcProvider],
) -> None:
    stack, idp = signed
    browser = TestClient(stack.client.app, follow_redirects=False)
    start = browser.get("/dashboard/oidc/start?next=/dashboard/approvals")
    assert start.status_code == 303, start.text
    back = urlsplit(idp.sign_in(start.headers["location"], RESERVED))
    page = browser.get(f"{back.path}?{back.query}")
    assert page.status_code == 403 and "identity_reserved" in page.text, page.text
    from_a_terminal = stack.client.post(
        "/auth/oidc/exchange", json={"id_token": _cli_id_token(idp, RESERVED)}
    )
    assert from_a_terminal.status_code == 403, from_a_terminal.text
    assert from_a_terminal.json()["error"]["code"] == "identity_reserved"
    assert stack.sql("SELECT COUNT(*) FROM dashboard_sessions")[0][0] == 0
    assert _events(stack, "identity_reserved") >= 1

    # A session opened under that name before it was reserved is no session.
    from ledger import oidc, open_database

    db = open_database(stack.database_url)
    try:
        with db.engine.begin() as conn:
            oidc.start_session(conn, "left-from-before", oidc.Session(RESERVED, ["approver"]),
                               issuer=idp.issuer, hours=1)  # fmt: skip
    finally:
        db.dispose()
    old = {"Authorization": "Bearer oidc.left-from-before"}
    assert stack.client.get("/runs", headers=old).status_code == 401
