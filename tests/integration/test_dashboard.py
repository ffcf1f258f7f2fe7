"""The dashboard without a browser: sessions, roles, cross-site forms, escaping.

(The browser test, tests/e2e/test_dashboard_browser.py, drives it in Chromium.)"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from shim.api.dashboard.session import COOKIE, csrf_of
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import Stack

HOSTILE = "<script>alert(1)</script>"
BIDI = "rm a\u202e; b"


def _login(stack: Stack, name: str) -> TestClient:
    client = TestClient(stack.client.app, follow_redirects=False)
    token = stack.client.people.tokens[name]
    r = client.post("/dashboard/login", data={"token": token, "next": "/dashboard"})
    assert r.status_code == 303 and r.headers["location"] == "/dashboard", r.text
    cookie = r.headers["set-cookie"]
    assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/dashboard" in cookie
    return client


def _waiting_run(stack: Stack) -> tuple[str, str]:
    plan = noop_plan(1)
    body = {"recipe": "echo", "objective": HOSTILE + BIDI, "mode": "run-plan", "plan": plan}
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    return run_id, digest_of_plan(plan)


def test_pages_need_a_session_and_a_valid_token(stack: Stack) -> None:
    anonymous = TestClient(stack.client.app, follow_redirects=False)
    r = anonymous.get("/dashboard/approvals?x=1")
    assert r.status_code == 303
    assert r.headers["location"] == "/dashboard/login?next=/dashboard/approvals%3Fx%3D1"
    bad = anonymous.post("/dashboard/login", data={"token": "not-a-token"})
    assert bad.status_code == 401 and "That token is not valid." in bad.text
    login = anonymous.get("/dashboard/login")
    assert "var/local-tokens.txt" in login.text  # where gatehouse up's tokens are
    assert "set-cookie" not in bad.headers
    # an open redirect is refused: next may only point into the dashboard
    token = stack.client.people.tokens["olga"]
    r = anonymous.post("/dashboard/login", data={"token": token, "next": "https://evil.example/"})
    assert r.headers["location"] == "/dashboard"
    page = anonymous.get("/dashboard/login")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-frame-options"] == "DENY"


def test_roles_apply_as_on_the_api(stack: Stack) -> None:
    run_id, digest = _waiting_run(stack)
    sam = _login(stack, "sam")  # a submitter, not of this run
    assert sam.get(f"/dashboard/runs/{run_id}").status_code == 403
    assert sam.get("/dashboard/security").status_code == 403
    assert sam.get("/dashboard/approvals").status_code == 403
    listed = sam.get("/dashboard")
    assert listed.status_code == 200 and run_id not in listed.text  # only its own runs
    alice = _login(stack, "alice")  # its submitter: sees it, cannot approve it
    page = alice.get(f"/dashboard/runs/{run_id}")
    assert page.status_code == 200 and 'id="approve"' not in page.text
    csrf = csrf_of(stack.client.people.tokens["alice"])
    r = alice.post(f"/dashboard/runs/{run_id}/approve", data={"csrf": csrf, "plan_digest": digest})
    assert r.status_code == 403 and "forbidden" in r.text
    ann = _login(stack, "ann")  # an approver
    page = ann.get(f"/dashboard/runs/{run_id}")
    assert 'id="approve"' in page.text and 'id="ledger"' not in page.text  # not an operator
    assert ann.get("/dashboard/workers").status_code == 403
    refused = stack.sql(
        "SELECT COUNT(*) FROM security_events WHERE body_json LIKE :p", p="%dashboard%"
    )
    assert refused[0][0] >= 1


def test_forms_from_elsewhere_are_refused(stack: Stack) -> None:
    run_id, digest = _waiting_run(stack)
    bob = _login(stack, "bob")
    form = {"plan_digest": digest}
    assert bob.post(f"/dashboard/runs/{run_id}/approve", data=form).status_code == 403
    wrong = {**form, "csrf": csrf_of("another token")}
    assert bob.post(f"/dashboard/runs/{run_id}/approve", data=wrong).status_code == 403
    good = {**form, "csrf": csrf_of(stack.client.people.tokens["bob"])}
    other_site = {"Origin": "https://evil.example"}
    r = bob.post(f"/dashboard/runs/{run_id}/approve", data=good, headers=other_site)
    assert r.status_code == 403
    assert stack.run(run_id)["status"] == "waiting_approval"  # nothing was decided
    r = bob.post(
        f"/dashboard/runs/{run_id}/approve", data=good, headers={"Origin": "http://testserver"}
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/dashboard/runs/{run_id}?done=approved%20by%20bob"
    stack.wait(run_id, {"succeeded"})


def test_model_text_is_escaped_everywhere(stack: Stack) -> None:
    run_id, _ = _waiting_run(stack)
    bob = _login(stack, "bob")
    for path in ("/dashboard", "/dashboard/approvals", f"/dashboard/runs/{run_id}"):
        page = bob.get(path)
        assert page.status_code == 200, path
        assert HOSTILE not in page.text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, path
        assert "\u202e" not in page.text and "rm a\\u202e; b" in page.text, path
    # filters: by status and recipe; an unknown status is a 422 page, not a crash
    assert run_id in bob.get("/dashboard?status=waiting_approval&recipe=echo").text
    assert run_id not in bob.get("/dashboard?status=succeeded").text
    assert run_id not in bob.get("/dashboard?recipe=nope").text
    assert bob.get("/dashboard?status=bogus").status_code == 422
    body = bob.get(f"/dashboard/runs/{run_id}/body")
    assert body.status_code == 200 and "<html" not in body.text
    assert re.search(r'id="run-status">waiting for approval<', body.text)
    assert (
        bob.get("/dashboard/static/live.js").headers["content-type"].startswith("text/javascript")
    )
    assert bob.get("/dashboard/static/nope.js").status_code == 404


def test_the_plan_card_says_what_the_plan_will_do_and_who_may_decide(stack: Stack) -> None:
    """The first screen says in words what the plan does and offers a decision only to
    whoever may make it; anyone else reads why not, never a dead end after a click."""
    plan = noop_plan(2)
    plan["steps"][1]["title"] = "Say it twice"
    body = {"recipe": "echo", "objective": "words", "mode": "run-plan", "plan": plan}
    r = stack.client.post("/intent", json=body, headers=stack.client.people.auth("max"))
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})

    ann = _login(stack, "ann")  # an approver, not its submitter
    page = ann.get(f"/dashboard/runs/{run_id}").text
    assert 'id="card-state" class="state">waiting for a decision<' in page
    assert "<strong>Read-only:</strong>" in page and "Network: none" in page
    assert "<strong>Say it twice</strong>: Records a note" in page
    assert "nothing: a note" in page  # what a noop step sends
    assert 'id="approve"' in page and 'id="not-deciding"' not in page
    assert 'id="replay"' not in page  # nothing to replay before the run ends

    max_ = _login(stack, "max")  # its submitter, an approver too: four-eyes
    page = max_.get(f"/dashboard/runs/{run_id}").text
    assert 'id="approve"' not in page
    assert "You cannot decide on this plan: max submitted run" in page
    olga = _login(stack, "olga")  # an operator only
    page = olga.get(f"/dashboard/runs/{run_id}").text
    assert 'id="approve"' not in page and "olga is not an approver" in page

    csrf = csrf_of(stack.client.people.tokens["ann"])
    done = ann.post(
        f"/dashboard/runs/{run_id}/approve",
        data={"csrf": csrf, "plan_digest": digest_of_plan(plan)},
    )
    assert done.status_code == 303
    stack.wait(run_id, {"succeeded"})
    page = olga.get(f"/dashboard/runs/{run_id}").text
    assert 'id="card-state" class="state">approved<' in page
    assert 'id="replay"' in page  # finished: an operator may replay it
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)  # times as people read them
    assert "<summary>output</summary>" in page  # each finished step's output
    workers = olga.get("/dashboard/workers").text
    assert ">True<" not in workers and ">False<" not in workers
