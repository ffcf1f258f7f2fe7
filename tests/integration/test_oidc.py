"""Signing in to the dashboard with a real OpenID Provider (panva's oidc-provider,
started by the test): a person's groups give their roles, the session is theirs
until it ends or they log out, and a sign-in's state is taken once and only by the
browser that started it. Both databases."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from shim.api.dashboard.session import COOKIE, csrf_of
from tests.conftest import require_backend
from tests.integration.oidc_stack import signed_stack
from tests.support.oidc_provider import OidcProvider
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.served import ServedShim
from tests.support.stack import BACKENDS, Stack

CALLBACK = "http://testserver/dashboard/oidc/callback"
ACCOUNTS = {"bob": ["change-approvers"], "olga": ["platform-oncall", "unrelated"],
            "nobody": ["unrelated"], "Mixed.Case": ["change-approvers"]}  # fmt: skip


@pytest.fixture(params=BACKENDS)
def signed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Stack, OidcProvider]]:
    require_backend(request.param)
    with signed_stack(
        request.param,
        tmp_path,
        CALLBACK,
        ACCOUNTS,
        {"change-approvers": ["approver"], "platform-oncall": ["operator"]},
    ) as found:
        yield found


def _browser(stack: Stack) -> TestClient:
    return TestClient(stack.client.app, follow_redirects=False)


def _sign_in(stack: Stack, idp: OidcProvider, login: str, browser: TestClient) -> str:
    """The person signs in through the provider; the callback path the browser returns to."""
    start = browser.get("/dashboard/oidc/start?next=/dashboard/approvals")
    assert start.status_code == 303, start.text
    back = idp.sign_in(start.headers["location"], login)
    parts = urlsplit(back)
    return f"{parts.path}?{parts.query}"


def test_a_person_signs_in_with_their_company_account_and_decides(
    signed: tuple[Stack, OidcProvider],
) -> None:
    stack, idp = signed
    plan = noop_plan(1)
    r = stack.submit({"recipe": "echo", "objective": "sso", "mode": "run-plan", "plan": plan})
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})

    browser = _browser(stack)
    login_page = browser.get("/dashboard/login")
    assert 'id="oidc-login"' in login_page.text and idp.issuer in login_page.text
    back = browser.get(_sign_in(stack, idp, "bob", browser))
    assert back.status_code == 200, back.text
    assert "You are bob (approver)" in back.text
    assert 'content="0; url=/dashboard/approvals"' in back.text
    session = browser.cookies.get(COOKIE)
    assert session is not None and session.startswith("oidc.")
    stored = stack.sql("SELECT identity, roles_json FROM dashboard_sessions")
    assert [(i, json.loads(r)) for i, r in stored] == [("bob", ["approver"])]
    assert session.removeprefix("oidc.") not in json.dumps(
        stack.sql("SELECT * FROM dashboard_sessions")
    )

    queue = browser.get("/dashboard/approvals")
    assert queue.status_code == 200 and run_id in queue.text
    assert browser.get("/dashboard/security").status_code == 403  # not an operator
    form = {"csrf": csrf_of(session), "plan_digest": digest_of_plan(plan)}
    decided = browser.post(f"/dashboard/runs/{run_id}/approve", data=form)
    assert decided.status_code == 303, decided.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    assert [a["decided_by"] for a in stack.run(run_id)["approvals"]] == ["bob"]

    out = browser.post("/dashboard/logout", data={"csrf": csrf_of(session)})
    assert out.status_code == 303
    assert stack.sql("SELECT COUNT(*) FROM dashboard_sessions")[0][0] == 0
    again = _browser(stack)
    again.cookies.set(COOKIE, session, path="/dashboard")  # the old cookie, kept by someone
    assert again.get("/dashboard/approvals").headers["location"].startswith("/dashboard/login")


def test_a_sign_in_is_taken_once_and_only_by_the_browser_that_started_it(
    signed: tuple[Stack, OidcProvider],
) -> None:
    stack, idp = signed
    browser = _browser(stack)
    callback = _sign_in(stack, idp, "olga", browser)
    elsewhere = _browser(stack)  # someone else's browser, handed the callback link
    stolen = elsewhere.get(callback)
    assert stolen.status_code == 400 and "oidc_state_invalid" in stolen.text
    first = browser.get(callback)
    assert first.status_code == 200 and "You are olga (operator)" in first.text
    replayed = browser.get(callback)
    assert replayed.status_code == 400 and "oidc_state_invalid" in replayed.text
    forged = _browser(stack)
    forged.cookies.set("gatehouse_oidc_state", "made-up", path="/dashboard/oidc")
    made_up = forged.get("/dashboard/oidc/callback?code=x&state=made-up")
    assert made_up.status_code == 400 and "oidc_state_invalid" in made_up.text
    refusals = stack.sql("SELECT COUNT(*) FROM security_events WHERE body_json LIKE :p",
                         p="%oidc_state_invalid%")  # fmt: skip
    assert refusals[0][0] >= 1


def test_a_person_without_a_role_or_a_usable_identity_is_refused(
    signed: tuple[Stack, OidcProvider],
) -> None:
    stack, idp = signed
    browser = _browser(stack)
    none = browser.get(_sign_in(stack, idp, "nobody", browser))
    assert none.status_code == 403 and "none of their groups gives a Gatehouse role" in none.text
    mixed = browser.get(_sign_in(stack, idp, "Mixed.Case", browser))
    assert mixed.status_code == 401 and "oidc_token_invalid" in mixed.text
    assert browser.cookies.get(COOKIE) is None
    assert stack.sql("SELECT COUNT(*) FROM dashboard_sessions")[0][0] == 0


def test_the_cli_signs_in_from_a_terminal_and_its_session_token_works_on_the_api(
    signed: tuple[Stack, OidcProvider], tmp_path: Path
) -> None:
    """``gatehouse login``: the device sign-in, confirmed by the person in a browser;
    the session token it prints is a bearer token for that person on the API."""
    stack, idp = signed
    plan = noop_plan(1)
    run_id = stack.submit({"recipe": "echo", "objective": "cli", "mode": "run-plan",
                           "plan": plan}).json()["run_id"]  # fmt: skip
    stack.wait(run_id, {"waiting_approval"})
    oidc_env = {"GATEHOUSE_OIDC": str(tmp_path / "oidc.yaml")}
    with ServedShim(stack.database_url, stack.client.people.file, env=oidc_env) as url:
        cli = subprocess.Popen(
            [str(Path(sys.executable).parent / "gatehouse"), "login", "--url", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "GATEHOUSE_URL": url},
        )  # fmt: skip
        assert cli.stderr is not None
        told = cli.stderr.readline()  # "gatehouse: to sign in, open URL and confirm the code C"
        where = re.search(r"open (\S+) and confirm the code (\S+)", told)
        assert where is not None, told
        done = idp.confirm_device(where.group(1), "bob")
        assert "Sign-in Success" in done
        out, err = cli.communicate(timeout=60)
        assert cli.returncode == 0, err
        assert "signed in as bob (approver) for 8 h" in err
        token = re.fullmatch(r"export GATEHOUSE_TOKEN=(oidc\.\S+)\n", out)
        assert token is not None, out
        bearer = {"Authorization": f"Bearer {token.group(1)}"}
        ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)},
                               headers=bearer)  # fmt: skip
        assert ok.status_code == 200 and ok.json()["decided_by"] == "bob", ok.text
        assert stack.client.get("/workers", headers=bearer).status_code == 403  # not an operator
        stale = stack.client.post("/auth/oidc/exchange", json={"id_token": "x" * 40})
        assert stale.status_code == 401
        assert stale.json()["error"]["code"] == "oidc_token_invalid"
        gone = subprocess.run(  # `gatehouse logout`: the session ends on the server
            [str(Path(sys.executable).parent / "gatehouse"), "logout", "--url", url],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "GATEHOUSE_URL": url, "GATEHOUSE_TOKEN": token.group(1)},
        )  # fmt: skip
        assert gone.returncode == 0, gone.stderr
        assert "the session of bob has ended" in gone.stdout
    assert stack.sql("SELECT COUNT(*) FROM dashboard_sessions")[0][0] == 0
    ended = stack.client.get(f"/runs/{run_id}", headers=bearer)
    assert ended.status_code == 401 and "session has ended" in ended.text
