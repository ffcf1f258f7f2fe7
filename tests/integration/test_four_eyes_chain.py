"""Four-eyes over a whole chain of edits and forks (issue 48, item 2).

A plan that reached a run through edits and forks was written by several people:
who submitted the first run, every approver who edited it on the way, everyone who
asked for a fork. None of them may approve it, reject it, edit it again or count
toward its quorum, however far back their part lies; the run view, the dashboard
and the CLI card name them all; someone outside the chain decides. Once, only the
last link's author was refused: approver A edited in a step, approver B made a
trivial edit of A's revision, and A approved the result alone. Chains of one to
three links, each link an edit or a fork, on both databases.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from contracts import Role, RunView
from shim.cli.run_card import run_card
from shim.tokens import add_token
from tests.support.plans import noop_plan
from tests.support.receivers import WebhookReceiver
from tests.support.stack import Stack

SUBMITTER = "max"  # submits and approves: four-eyes must hold for them too
# Who makes each link of a chain, in order; then who approves a run before it is
# forked (not an author of the fork), and the outsider who decides at the end.
LINK_MAKERS = ("bob", "ann", "cy")
FINISHER, OUTSIDER, SECOND = "eve", "dee", "fay"
# Every chain shape of one to three links.
CHAINS = [
    ("edit",),
    ("fork",),
    ("edit", "edit"),
    ("edit", "fork"),
    ("fork", "edit"),
    ("edit", "edit", "edit"),
    ("fork", "edit", "edit"),
    ("edit", "fork", "edit"),
]


@pytest.fixture(scope="module")
def people(stack: Stack) -> Iterator[Stack]:
    """The stack with more approvers than the shared set has (the shim reads its
    tokens file again when it changes)."""
    folks = stack.client.people
    for name in ("cy", "dee", "eve", "fay"):
        if name not in folks.tokens:
            folks.tokens[name] = add_token(folks.file, name, [Role.APPROVER])
    deadline = time.monotonic() + 30
    while stack.client.get("/runs?limit=1", headers=stack.auth("fay")).status_code == 401:
        assert time.monotonic() < deadline, "the shim never read the new tokens"
        time.sleep(0.1)
    yield stack


def _post(stack: Stack, who: str, path: str, body: dict[str, Any]) -> Any:
    return stack.client.post(path, json=body, headers=stack.auth(who))


def _submit(stack: Stack, plan: dict[str, Any], profile: str = "default") -> str:
    body = {"recipe": "echo", "objective": plan["objective"], "mode": "run-plan",
            "plan": plan, "policy_profile": profile}  # fmt: skip
    r = stack.client.post("/intent", json=body, headers=stack.auth(SUBMITTER))
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id


def _current(stack: Stack, run_id: str) -> tuple[dict[str, Any], str]:
    card = stack.run(run_id)["plan_card"]
    return card["plan"], str(card["plan_digest"])


def _edit(stack: Stack, who: str, run_id: str) -> Any:
    plan, digest = _current(stack, run_id)
    changed = {**plan, "objective": f"{plan['objective']}, edited by {who}"}
    return _post(stack, who, f"/runs/{run_id}/plan", {"plan": changed, "previous_digest": digest})


def _link(stack: Stack, kind: str, who: str, run_id: str) -> str:
    """The run one more link makes from ``run_id`` (waiting for a decision)."""
    if kind == "edit":
        r = _edit(stack, who, run_id)
    else:  # a fork needs a finished run with an approved plan
        ok = _post(
            stack, FINISHER, f"/approve/{run_id}", {"plan_digest": _current(stack, run_id)[1]}
        )
        assert ok.status_code == 200, ok.text
        assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
        r = _post(stack, who, f"/runs/{run_id}/fork", {"from_step": 1})
    assert r.status_code == 202, r.text
    new_id = str(r.json()["run_id"])
    stack.wait(new_id, {"waiting_approval"})
    return new_id


def _chain(stack: Stack, links: tuple[str, ...], plan: dict[str, Any], profile: str) -> str:
    run_id = _submit(stack, plan, profile)
    for kind, who in zip(links, LINK_MAKERS, strict=False):
        run_id = _link(stack, kind, who, run_id)
    return run_id


def _expected(links: tuple[str, ...]) -> list[tuple[str, str]]:
    parts = {"edit": "edited", "fork": "forked"}
    return [(SUBMITTER, "submitted")] + [
        (who, parts[k]) for k, who in zip(links, LINK_MAKERS, strict=False)
    ]


def _refused(answer: Any) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "four_eyes", answer.text


def _page(stack: Stack, who: str, run_id: str) -> str:
    browser = TestClient(stack.client.app, follow_redirects=False)
    token = stack.client.people.tokens[who]
    assert browser.post("/dashboard/login", data={"token": token}).status_code == 303
    page = browser.get(f"/dashboard/runs/{run_id}")
    assert page.status_code == 200, page.text
    return page.text


def _card_text(view: dict[str, Any]) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, width=300)
    for table in run_card(RunView.model_validate(view)):
        out.print(table)
    return buffer.getvalue()


@pytest.mark.parametrize("links", CHAINS, ids=["-".join(c) for c in CHAINS])
def test_nobody_who_wrote_part_of_the_plan_decides_on_it(
    people: Stack, links: tuple[str, ...]
) -> None:
    stack = people
    run_id = _chain(stack, links, noop_plan(2, objective="chain " + "-".join(links)), "default")
    view = stack.run(run_id)
    authors = _expected(links)
    assert [(a["name"], a["part"]) for a in view["plan_authors"]] == authors
    digest = str(view["plan_card"]["plan_digest"])

    for who, _part in authors:
        _refused(_post(stack, who, f"/approve/{run_id}", {"plan_digest": digest}))
        _refused(_post(stack, who, f"/reject/{run_id}", {"plan_digest": digest}))
        _refused(_edit(stack, who, run_id))
        page = _page(stack, who, run_id)  # the dashboard offers them no decision
        assert 'id="approve"' not in page and 'id="not-deciding"' in page, who
    after = stack.run(run_id)
    assert after["status"] == "waiting_approval" and after["approvals"] == []
    assert stack.sql("SELECT COUNT(*) FROM plan_edits WHERE parent_run_id = :r", r=run_id) == [(0,)]

    page = _page(stack, OUTSIDER, run_id)
    assert 'id="approve"' in page and 'id="plan-authors"' in page
    card = _card_text(view)
    assert "written by" in card and all(f"{n} ({p})" in card for n, p in authors), card

    ok = _post(stack, OUTSIDER, f"/approve/{run_id}", {"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"


def _changing_plan(url: str) -> dict[str, Any]:
    return {"objective": "post once", "steps": [
        {"step_id": "post", "verb": "write", "connector_id": "local-http", "driver_kind": "http",
         "input": {"url": url, "method": "POST", "json": {"n": 1}}}]}  # fmt: skip


def test_no_author_counts_toward_a_quorum(people: Stack) -> None:
    """Under ``two-person`` a changing plan needs two approvers: an author's approval
    is refused (nothing is recorded), and one on record from before the rule reached
    them (written here behind Gatehouse's back) counts for nothing."""
    stack = people
    with WebhookReceiver() as hook:
        run_id = _chain(stack, ("edit", "edit"), _changing_plan(f"{hook.url}/effect"), "two-person")
        digest = _current(stack, run_id)[1]
        for who, _part in _expected(("edit", "edit")):
            _refused(_post(stack, who, f"/approve/{run_id}", {"plan_digest": digest}))
        assert stack.sql("SELECT COUNT(*) FROM plan_endorsements WHERE run_id = :r", r=run_id) == [
            (0,)
        ]
        stack.execute(
            "INSERT INTO plan_endorsements (run_id, plan_digest, endorsed_by, comment,"
            " endorsed_at) VALUES (:r, :d, 'bob', NULL, '2000-01-01T00:00:00.000Z')",
            r=run_id,
            d=digest,
        )
        assert stack.run(run_id)["quorum"] == {"needed": 2, "approved_by": []}
        first = _post(stack, OUTSIDER, f"/approve/{run_id}", {"plan_digest": digest})
        assert first.status_code == 200, first.text
        assert first.json()["quorum"] == {"needed": 2, "approved_by": [OUTSIDER]}
        assert first.json()["decision"] == "approved" and stack.run(run_id)["approvals"] == []
        second = _post(stack, SECOND, f"/approve/{run_id}", {"plan_digest": digest})
        assert second.status_code == 200, second.text
        assert second.json()["quorum"] == {"needed": 2, "approved_by": [OUTSIDER, SECOND]}
        assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
        assert len(hook.on("/effect")) == 1


def test_a_chain_that_cannot_be_walked_is_decided_by_nobody(people: Stack) -> None:
    """A chain rewritten behind Gatehouse's back so that it cannot be walked to its
    first run (a link to a run that is gone, a loop, a run both edited and forked):
    who wrote the plan is not known, so nobody is shown to be outside it. Put back,
    the outsider decides."""
    stack = people
    run_id = _chain(stack, ("edit",), noop_plan(1, objective="broken chain"), "default")
    digest = _current(stack, run_id)[1]
    [(parent,)] = stack.sql("SELECT parent_run_id FROM plan_edits WHERE run_id = :r", r=run_id)
    broken = [
        ("UPDATE plan_edits SET parent_run_id = 'run_gone' WHERE run_id = :r", "approve"),
        ("UPDATE plan_edits SET parent_run_id = :r WHERE run_id = :r", "reject"),  # a loop
        ("UPDATE runs SET parent_run_id = :p WHERE run_id = :r", "approve"),  # edit and fork
    ]
    for statement, verb in broken:
        stack.execute("UPDATE plan_edits SET parent_run_id = :p WHERE run_id = :r", r=run_id,
                      p=parent)  # fmt: skip
        stack.execute(statement, r=run_id, p=parent)
        _refused(_post(stack, OUTSIDER, f"/{verb}/{run_id}", {"plan_digest": digest}))
        assert stack.run(run_id)["approvals"] == [], statement
    stack.execute("UPDATE runs SET parent_run_id = NULL WHERE run_id = :r", r=run_id)
    stack.execute("UPDATE plan_edits SET parent_run_id = :p WHERE run_id = :r", r=run_id, p=parent)
    ok = _post(stack, OUTSIDER, f"/approve/{run_id}", {"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
