"""``gatehouse approve`` warns when no worker is live to carry the approved run on
(``submit`` always did); the decision itself stands."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from contracts import JsonValue, RunStatus
from shim.cli import main

RUN = "run_" + "a" * 32
DIGEST = "b" * 64
REASON = "no worker of version gatehouse-5 has sent a heartbeat in the last 10 s"


def _shim(ready: bool) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/approve/{RUN}":
            body = json.loads(request.content)
            accepted = {"run_id": RUN, "plan_digest": body["plan_digest"], "decision": "approved"}
            return httpx.Response(200, json={**accepted, "decided_by": "bob", "recorded": True})
        assert request.url.path == "/readyz", request.url
        workers = {"ok": True, "live": 1} if ready else {"ok": False, "live": 0, "reason": REASON}
        return httpx.Response(200 if ready else 503, json={"checks": {"workers": workers}})

    return answer


@pytest.mark.parametrize("ready", [True, False])
def test_approve_says_when_no_worker_will_take_the_run(
    ready: bool,
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    answered_by(_shim(ready))
    with pytest.raises(SystemExit) as done:
        main(["approve", RUN, "--digest", DIGEST, "--url", "http://shim", "--token", "gh_x"])
    assert done.value.code == 0
    out = capsys.readouterr()
    assert f"Decision on {RUN}" in out.out
    assert (f"warning: {REASON}" in out.err) is not ready, out.err


def test_approve_wait_warns_before_it_follows_the_run(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With --wait the warning comes first (``submit``'s own words, from GET /readyz):
    the person knows why the run does not move while the CLI follows it."""
    view: dict[str, JsonValue] = {
        "run_id": RUN,
        "intent_id": "int_1",
        "recipe": "echo",
        "objective": "o",
        "mode": "full-cycle",
        "status": "succeeded",
        "phase": "done",
        "submitted_by": "alice",
        "policy_profile": "default",
        "tool_pool": "default",
        "plan_digest": DIGEST,
        "error_code": None,
        "error_message": None,
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:01.000Z",
        "plan_card": None,
        "approvals": [],
        "steps": [],
        "links": {},
    }
    decisions = _shim(ready=False)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/runs/{RUN}":
            return httpx.Response(200, json=view)
        return decisions(request)

    answered_by(answer)
    argv = ["approve", RUN, "--digest", DIGEST, "--url", "http://shim", "--token", "gh_x"]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--wait", "5"])
    assert done.value.code == 0
    err = capsys.readouterr().err
    assert f"warning: {REASON}" in err, err
    assert err.index(f"warning: {REASON}") < err.index(f"{RUN}: succeeded")


def _view(status: RunStatus, decision: str) -> dict[str, JsonValue]:
    approval: dict[str, JsonValue] = {
        "plan_digest": DIGEST,
        "decision": decision,
        "decided_by": "bob",
        "comment": None,
        "decided_at": "2026-01-01T00:00:02.000Z",
    }
    return {
        "run_id": RUN, "intent_id": "int_1", "recipe": "echo", "objective": "o",
        "mode": "full-cycle", "status": status.value, "phase": "done", "submitted_by": "alice",
        "policy_profile": "default", "tool_pool": "default", "plan_digest": DIGEST,
        "error_code": None, "error_message": None, "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:03.000Z", "plan_card": None, "approvals": [approval],
        "steps": [], "links": {},
    }  # fmt: skip


def _repeat(status: RunStatus, decision: str) -> Callable[[httpx.Request], httpx.Response]:
    """A shim that already holds ``decision`` by bob on the run's plan (``recorded`` false)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/runs/{RUN}":
            return httpx.Response(200, json=_view(status, decision))
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"checks": {"workers": {"ok": True, "live": 1}}})
        assert request.method == "POST", request.url
        accepted = {"run_id": RUN, "plan_digest": DIGEST, "decision": decision}
        return httpx.Response(200, json={**accepted, "decided_by": "bob", "recorded": False})

    return answer


@pytest.mark.parametrize("command", ["approve", "reject"])
@pytest.mark.parametrize("status", list(RunStatus))
def test_a_decision_already_on_record_says_what_is_there(
    command: str,
    status: RunStatus,
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every status a run can be in, either decision: a repeat never ends on a bare
    ``recorded false``. It names who decided and when; on a run still under way it
    ends 0 (the same decision stands), on a finished run 1 (it takes no decision)."""
    decision = "approved" if command == "approve" else "rejected"
    answered_by(_repeat(status, decision))
    with pytest.raises(SystemExit) as done:
        main([command, RUN, "--digest", DIGEST, "--url", "http://shim", "--token", "gh_x"])
    out = capsys.readouterr()
    held = f"already {decision} by bob at 2026-01-01T00:00:02.000Z"
    assert held in out.err and "nothing new recorded" in out.err, out.err
    if status.terminal:
        assert done.value.code == 1
        assert f"run {RUN} is {status.value}; it takes no decision" in out.err, out.err
        assert out.out == ""
    else:
        assert done.value.code == 0
        assert f"the run is {status.value}" in out.err, out.err


def test_a_repeat_toward_a_quorum_says_it_was_already_counted(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        quorum = {"needed": 2, "approved_by": ["bob"]}
        accepted = {"run_id": RUN, "plan_digest": DIGEST, "decision": "approved"}
        body = {**accepted, "decided_by": "bob", "recorded": False, "quorum": quorum}
        return httpx.Response(200, json=body)

    answered_by(answer)
    with pytest.raises(SystemExit) as done:
        main(["approve", RUN, "--digest", DIGEST, "--url", "http://shim", "--token", "gh_x"])
    assert done.value.code == 0
    err = capsys.readouterr().err
    assert "already counted (nothing new recorded): 1 of 2 approvers" in err, err
