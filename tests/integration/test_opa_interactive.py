"""An interactive OPA run, on SQLite and PostgreSQL: a session of turns, each approved.

The archive's prompt is the first turn. After its plan ran, the run waits
(``waiting_input``); each ``POST /runs/{id}/messages`` is the next turn: the
planner (the ``echo`` template here) plans it, the new steps are appended to
the plan under fresh ids, the plan card gets a new revision that needs its
own approval (the old digest is stale), and the steps run. ``end`` closes the
session; the output archive's history holds every turn. The runs replay at
teardown.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opa
import pytest

from opa_format import read_archive
from tests.conftest import require_backend
from tests.support.mova import load_upstream, vendor_errors
from tests.support.opa import batch_archive, submit_archive
from tests.support.stack import BACKENDS, Stack, approve_fork, running_stack


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path_factory.mktemp(f"chat-{request.param}")) as s:
        yield s


def _archive() -> bytes:
    return batch_archive(
        "Note what {{archive_name}} holds.",
        {"data/notes.txt": b"three notes\n"},
        mode=opa.ExecutionMode.INTERACTIVE.value,
    )


def _approve(stack: Stack, run_id: str, revision: int) -> dict[str, Any]:
    view = stack.wait(run_id, {"waiting_approval", "failed"})
    assert view["status"] == "waiting_approval", view
    card = view["plan_card"]
    assert card["revision"] == revision, card
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": card["plan_digest"]})
    assert r.status_code == 200, r.text
    card_out: dict[str, Any] = card
    return card_out


def _parked_at(stack: Stack, run_id: str) -> str | None:
    """Where the run is parked (None: not within 30 s). Its status reads
    waiting_input a moment before its stretch has parked it and ended."""
    deadline = time.monotonic() + 30
    while True:
        [(wait, at)] = stack.sql(
            "SELECT parked_wait, parked_at FROM runs WHERE run_id = :r", r=run_id
        )
        if wait is not None:
            return str(at)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def _say(stack: Stack, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
    r = stack.client.post(f"/runs/{run_id}/messages", json=body)
    assert r.status_code == 202, r.text
    out: dict[str, Any] = r.json()
    return out


def test_an_interactive_run_takes_two_follow_ups_each_approved(
    stack: Stack, shared_dir: Path | None
) -> None:
    run_id = submit_archive(stack, _archive(), "notes.opa", recipe="echo", profile="default")
    first = _approve(stack, run_id, 1)
    view = stack.wait(run_id, {"waiting_input", "failed"})
    assert view["status"] == "waiting_input", view
    assert [s["step_id"] for s in view["steps"]] == ["echo"]
    # a session between turns is rows only: parked at its input, no workflow holds it
    assert _parked_at(stack, run_id) == "@input-1"

    said = _say(stack, run_id, {"text": "now count them"})
    assert (said["turn"], said["end"], said["sent_by"]) == (1, False, "alice")
    second = _approve(stack, run_id, 2)
    # the old plan's digest is stale: the new turn needs its own approval
    stale = stack.client.post(f"/approve/{run_id}", json={"plan_digest": first["plan_digest"]})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_plan_digest"
    steps = [s["step_id"] for s in second["plan"]["steps"]]
    assert steps == ["echo", "t2-echo"]  # appended, under a fresh id
    added = {c["step_id"] for c in second["changes"] if c["change"] == "added"}
    assert added == {"t2-echo"}, second["changes"]
    assert not [c for c in second["changes"] if c["change"] == "removed"]
    assert "### follow-up 1\nnow count them" in second["plan"]["objective"]
    assert stack.wait(run_id, {"waiting_input", "failed"})["status"] == "waiting_input"

    assert _say(stack, run_id, {"text": "and sort them"})["turn"] == 2
    third = _approve(stack, run_id, 3)
    assert [s["step_id"] for s in third["plan"]["steps"]] == ["echo", "t2-echo", "t3-echo"]
    assert stack.wait(run_id, {"waiting_input", "failed"})["status"] == "waiting_input"

    assert _say(stack, run_id, {"end": True})["end"] is True
    done = stack.wait(run_id, {"succeeded", "failed", "cancelled"})
    assert done["status"] == "succeeded", done
    assert [s["step_id"] for s in done["steps"]] == ["echo", "t2-echo", "t3-echo"]
    decided = [a["decision"] for a in done["approvals"]]
    assert decided == ["approved", "approved", "approved"]

    # the session is closed: no more messages
    late = stack.client.post(f"/runs/{run_id}/messages", json={"text": "one more"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "run_not_awaiting_input"
    # the output archive's history holds the three turns
    out = read_archive(stack.client.get(f"/runs/{run_id}/output.opa").content, name="chat")
    assert out.history is not None
    said_by_user = [m.content for m in out.history.messages if m.role == "user"]
    assert said_by_user[1:] == ["now count them", "and sort them"]
    assert "t3-echo: ok" in str(out.history.messages[-1].content)
    assert "ended succeeded" in str(out.history.messages[-1].content)
    # the new episodes (the archive, each follow-up) are MOVA 4.1.1 like the rest
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    kinds = [e["episode_type"] for e in episodes]
    assert kinds.count("execution/follow_up") == 3 and "execution/opa_archive" in kinds
    assert {
        e["episode_type"]: vendor_errors(e["body"]) for e in episodes if vendor_errors(e["body"])
    } == {}
    if shared_dir is not None and (shared_dir / "mova-4.1.1").is_dir():
        upstream = load_upstream(shared_dir)
        assert [upstream.errors(e["body"]) for e in episodes if upstream.errors(e["body"])] == []


def test_messages_are_refused_where_no_session_waits(stack: Stack) -> None:
    batch = submit_archive(
        stack, batch_archive("Note it.", {}), "batch.opa", recipe="echo", profile="default"
    )
    r = stack.client.post(f"/runs/{batch}/messages", json={"text": "hello"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_not_awaiting_input"
    bad = stack.client.post(f"/runs/{batch}/messages", json={"text": "x", "end": True})
    assert bad.status_code == 422, bad.text
    missing = stack.client.post(f"/runs/run_{'0' * 32}/messages", json={"text": "x"})
    assert missing.status_code == 404
    # another submitter may not write to alice's run
    chat = submit_archive(stack, _archive(), "notes.opa", recipe="echo", profile="default")
    other = stack.client.post(
        f"/runs/{chat}/messages", json={"text": "x"}, headers=stack.auth("sam")
    )
    assert other.status_code == 403, other.text


def test_a_cancel_ends_a_run_waiting_for_input(stack: Stack) -> None:
    run_id = submit_archive(stack, _archive(), "notes.opa", recipe="echo", profile="default")
    _approve(stack, run_id, 1)
    assert stack.wait(run_id, {"waiting_input", "failed"})["status"] == "waiting_input"
    c = stack.client.post(f"/runs/{run_id}/cancel", json={"reason": "done talking"})
    assert c.status_code == 200, c.text
    done = stack.wait(run_id, {"cancelled", "succeeded", "failed"})
    assert done["status"] == "cancelled", done


def test_a_fork_of_an_opa_run_gets_its_own_output_archive(stack: Stack) -> None:
    archive = batch_archive("Note it.", {"data/notes.txt": b"three notes\n"})
    parent = submit_archive(stack, archive, "once.opa", recipe="echo", profile="default")
    _approve(stack, parent, 1)
    assert stack.wait(parent, {"succeeded", "failed"})["status"] == "succeeded"
    r = stack.client.post(f"/runs/{parent}/fork", json={"from_step": 1}, headers=stack.auth("bob"))
    assert r.status_code == 202, r.text
    fork = r.json()["run_id"]
    approve_fork(stack, fork)
    done = stack.wait(fork, {"succeeded", "failed"})
    assert done["status"] == "succeeded", done
    # the fork ran the parent's archive and packed its own output
    assert done["opa"]["archive_sha256"] == stack.run(parent)["opa"]["archive_sha256"]
    got = stack.client.get(f"/runs/{fork}/output.opa")
    assert got.status_code == 200, got.text
    out = read_archive(got.content, name="fork")
    assert out.history is not None
    assert f"Gatehouse run {fork} ended succeeded" in str(out.history.messages[-1].content)
    names = {a["name"] for a in stack.client.get(f"/runs/{fork}/artifacts").json()["artifacts"]}
    assert {"input.opa", "output.opa"} <= names
