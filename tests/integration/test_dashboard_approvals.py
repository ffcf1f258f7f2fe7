"""The Approvals page as a queue: each row's risk, step count, time left and what it
still needs; sorted and filtered by GET parameters; a bad value is the page's own
error, never a 500. Also the plan card's ⚠, on the steps that earn one only."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from ledger import iso
from shim.api.dashboard.session import COOKIE
from tests.support.plans import ECHO, NOTE, digest_of_plan
from tests.support.stack import Stack


def _login(stack: Stack, name: str) -> TestClient:
    client = TestClient(stack.client.app, follow_redirects=False)
    token = stack.client.people.tokens[name]
    r = client.post("/dashboard/login", data={"token": token, "next": "/dashboard"})
    assert r.status_code == 303 and f"{COOKIE}=" in r.headers["set-cookie"], r.text
    return client


def _waiting(stack: Stack, objective: str, steps: list[dict[str, Any]], profile: str) -> str:
    plan = {"objective": objective, "steps": steps}
    body = {"recipe": "echo", "objective": objective, "mode": "run-plan", "plan": plan,
            "policy_profile": profile}  # fmt: skip
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    return run_id


def _expires_in(stack: Stack, run_id: str, seconds: float) -> None:
    until = iso(datetime.now(UTC) + timedelta(seconds=seconds))
    stack.execute("UPDATE runs SET parked_until = :u WHERE run_id = :r", u=until, r=run_id)


def _rows(html: str) -> list[str]:
    table = html.split('id="waiting"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-run-id="([^"]+)"', table)


def _row(html: str, run_id: str) -> str:
    return html.split(f'data-run-id="{run_id}"', 1)[1].split("</tr>", 1)[0]


def test_the_queue_sorts_and_filters_itself(stack: Stack) -> None:
    post = {
        "step_id": "post",
        "verb": "write",
        "connector_id": "local-http",
        "driver_kind": "http",
        "input": {"url": "http://127.0.0.1:9/effect", "method": "POST", "json": {"n": 1}},
    }
    note = {**NOTE, "input": {"text": "hi"}}  # fmt: skip
    read = _waiting(stack, "queue read", [note], "default")
    quorum = _waiting(stack, "queue quorum", [post], "two-person")
    shell = _waiting(stack, "queue shell", [ECHO, {**note, "step_id": "n2"}], "default")
    _expires_in(stack, read, 30 * 60)
    _expires_in(stack, quorum, 5 * 86400)
    _expires_in(stack, shell, 2 * 3600)
    bob = stack.client.post(
        f"/approve/{quorum}",
        json={"plan_digest": digest_of_plan({"objective": "queue quorum", "steps": [post]})},
        headers=stack.auth("bob"),
    )
    assert bob.status_code == 200 and bob.json()["quorum"]["approved_by"] == ["bob"], bob.text
    ours = {read, quorum, shell}

    ann = _login(stack, "ann")

    def listed(query: str = "") -> list[str]:
        page = ann.get(f"/dashboard/approvals{query}")
        assert page.status_code == 200, (query, page.text)
        return [r for r in _rows(page.text) if r in ours]

    # highest risk first, then least time left; then by time left; then the oldest
    assert listed() == [shell, quorum, read]
    assert listed("?sort=risk") == [shell, quorum, read]
    assert listed("?sort=left") == [read, shell, quorum]
    assert listed("?sort=oldest") == [read, quorum, shell]
    # filters: by the plan's highest risk, by time left, by what it still needs
    assert listed("?risk=read") == [read]
    assert listed("?risk=change") == [shell, quorum]
    assert listed("?risk=outside") == []
    assert listed("?left=1h") == [read]
    assert listed("?left=1d&sort=left") == [read, shell]
    assert listed("?needs=more") == [quorum]
    assert listed("?needs=first&risk=change") == [shell]

    page = ann.get("/dashboard/approvals").text
    shell_row, quorum_row, read_row = (_row(page, r) for r in (shell, quorum, read))
    assert '<td class="steps">2</td>' in shell_row and '<td class="steps">1</td>' in read_row
    assert "⚠ change<br><small>change (1 step)</small>" in shell_row
    assert "⚠" not in read_row and ">read<" in read_row
    assert '<td class="needs">1 of 2 approvers</td>' in quorum_row
    assert '<td class="needs">an approver</td>' in read_row
    assert re.search(r'<td class="left soon"[^>]*>\d+ min</td>', read_row)
    assert re.search(r'<td class="left"[^>]*>\d+ h \d+ min</td>', shell_row)
    assert re.search(r'<td class="left"[^>]*>\d+ d \d+ h</td>', quorum_row)
    assert "selected>highest risk first" in page  # the form shows what is chosen

    # the plan card: ⚠ on the step that can change something, none on the note
    card = ann.get(f"/dashboard/runs/{shell}").text
    words = card.split('id="plan-steps-words"', 1)[1].split("</ol>", 1)[0]
    marked = re.findall(r'<li data-step="([^"]+)">(<span class="warn")?', words)
    assert marked == [("e", '<span class="warn"'), ("n2", "")]
    assert 'id="plan-risk"><strong>Risk:</strong> change (1 step), each marked ⚠ below.' in card
    assert 'id="run-status">waiting for approval<' in card  # words, not waiting_approval
    for shown in (card, page, ann.get("/dashboard").text):
        assert ">waiting_approval<" not in shown and "max cost usd" not in shown


def test_a_bad_sort_or_filter_is_the_pages_own_error(stack: Stack) -> None:
    ann = _login(stack, "ann")
    for query, words in [
        ("sort=bogus", "There is no sort “bogus”: it takes one of risk, left, oldest."),
        ("risk=high", "There is no risk “high”: it takes one of read, change, outside."),
        ("left=2h", "There is no left “2h”: it takes one of 1h, 8h, 1d, 7d."),
        ("needs=two", "There is no needs “two”: it takes one of first, more."),
        ("risk=%3Cscript%3E", "There is no risk “&lt;script&gt;”"),
        ("sort=" + "x" * 500, "There is no sort “" + "x" * 39 + "…”"),
        ("sort=a%E2%80%AEb", "There is no sort “a\\u202eb”"),
    ]:
        page = ann.get(f"/dashboard/approvals?{query}")
        assert page.status_code == 422, (query, page.status_code)
        assert words in page.text, (query, page.text)
        assert 'id="queue-filters"' in page.text and 'id="waiting"' not in page.text
        assert "<script>" not in page.text and "\u202e" not in page.text
