"""End to end on PostgreSQL with a real OpenCode: ``gatehouse up`` (shim and a
worker as OS processes, over HTTP), the worker supervising the pinned
``opencode serve``, which talks to the scripted model running in this test.

Each case is one run whose prompts pick their turns from one script: compile
with the plan agent → approve → the build agent edits a real file; a stall that
climbs the whole timeout ladder to ``oc_timeout``; a stall rescued by the
narrowed re-prompt; a permission the profile refuses; a child-session attempt;
and a worker killed mid-turn.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts import ErrorCode, Plan, RunView, digest_of
from shim.cli.client import Client
from shim.local import free_port, start_worker, stop
from tests.conftest import require_backend
from tests.support.opencode import first_prompts, require_opencode, write_call
from tests.support.stack import drop_database, fresh_database_url, shim_client, wait_for_status
from worker.handlers.opencode.pin import read_pin
from worker.handlers.opencode.turn import marker_of
from worker.handlers.opencode.workspace import take
from worker.runtime import WorkerSettings
from worker.scripted_model import ScriptedModel, load_script

PROFILE = "opencode-quick"  # stall_s 4: a quiet turn is a stall


def _step(step_id: str, prompt: str, subgoals: list[str] | None = None) -> dict[str, Any]:
    step_input: dict[str, Any] = {"prompt": prompt}
    if subgoals is not None:
        step_input["subgoals"] = subgoals
    return {
        "step_id": step_id,
        "verb": "edit",
        "connector_id": "workspace-opencode",
        "driver_kind": "opencode",
        "input": step_input,
    }


COMPILED = {
    "schema_id": "env.mova_agent_plan_v1",
    "objective": "add a greeting file",
    "steps": [_step("greet", "BUILD-GREETING: write greeting.txt saying hello")],
}
GREETING = b"hello from opencode\n"
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "Objective: E2E-EDIT",
            "replies": [{"tool_calls": [{"name": "StructuredOutput", "arguments": COMPILED}]}],
        },
        {
            "match": "BUILD-GREETING",
            "replies": [
                write_call("greeting.txt", GREETING.decode()),
                {"content": "wrote greeting.txt"},
            ],
        },
        {
            "match": "STALL-STEP",
            "replies": [write_call("part.txt", "part\n"), {"content": "hm", "stall": True}],
        },
        {
            "match": "STALL-NARROW",
            "replies": [write_call("part.txt", "one\n"), {"content": "hm", "stall": True}],
        },
        {
            "match": "SHRINK-STEP",
            "replies": [write_call("b.txt", "b\n"), {"content": "hm", "stall": True}],
        },
        {
            "match": "SHRINK-NARROW",
            "replies": [write_call("a.txt", "a\n"), {"content": "wrote a.txt"}],
        },
        {
            "match": "BASH-STEP",
            "replies": [
                {
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "rm -rf .", "description": "x"}}
                    ]
                },
                {"content": "the shell was refused"},
            ],
        },
        {
            "match": "CHILD-STEP",
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "task",
                            "arguments": {
                                "description": "helper",
                                "prompt": "do it",
                                "subagent_type": "general",
                            },
                        }
                    ]
                },
                {"content": "after"},
            ],
        },
        {
            "match": "CRASH-STEP",
            "replies": [
                write_call("crash.txt", "crash\n"),
                {"content": "wrote crash.txt", "delay_s": 3},
            ],
        },
    ]
}


@dataclass
class Up:
    api: Client
    approver: Client
    model: ScriptedModel
    var: Path


def _answers(base: str) -> bool:
    try:
        httpx.get(f"{base}/runs", timeout=2)
    except httpx.HTTPError:
        return False
    return True


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    require_opencode()
    with ScriptedModel(load_script(SCRIPT)) as m:
        yield m


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_backend("postgres")
    url = fresh_database_url("postgres", tmp_path_factory.mktemp("ocdb"))
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def up(pg_url: str, model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    tmp = tmp_path_factory.mktemp("ocup")
    port = free_port()
    log = tmp / "up.log"
    env = {
        **os.environ,
        "GATEHOUSE_OPENCODE_MODEL_URL": model.base_url,
        "GATEHOUSE_OPENCODE_MODEL": "scripted",
    }
    gatehouse = Path(sys.executable).parent / "gatehouse"
    argv = [str(gatehouse), "up", "--database-url", pg_url, "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "--workers", "1", "--var", str(tmp / "var")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    tokens = tmp / "var" / "local-tokens.txt"
    try:
        _wait_for(tokens.exists, 60, "gatehouse up to make its local identities")
        people = dict(line.split() for line in tokens.read_text().splitlines())
        base = f"http://127.0.0.1:{port}"
        _wait_for(lambda: _answers(base), 60, "the shim to listen")
        _wait_for(lambda: "worker-1 pid" in log.read_text(), 60, "the worker to start")
        api = Client(base, people["local-submitter"])
        approver = Client(base, people["local-approver"])
        yield Up(api, approver, model, tmp / "var")
        api.close()
        approver.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    # each worker stopped its OpenCode server (the pid file goes with a clean stop)
    assert not list((tmp / "var" / "opencode").rglob("opencode.pid")), log.read_text()[-2000:]


def _run_plan(up: Up, steps: list[dict[str, Any]]) -> RunView:
    plan: dict[str, Any] = {"objective": "opencode e2e", "steps": steps}
    accepted = up.api.submit(
        {
            "recipe": "echo",
            "objective": "opencode e2e",
            "mode": "run-plan",
            "plan": plan,
            "policy_profile": PROFILE,
        }
    )
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    waiting = up.api.wait(accepted.run_id, {"waiting_approval", "failed"}, 60)
    assert waiting.status.value == "waiting_approval", _why(up, waiting)
    up.approver.decide(accepted.run_id, True, digest)
    return up.api.wait(accepted.run_id, {"succeeded", "failed", "needs_operator"}, 180)


def _why(up: Up, view: RunView) -> str:
    """What a failed wait shows: the run's error and each step's, and the stack's log tail."""
    steps = "; ".join(
        f"{s.step_id} {s.status} {s.error_code}: {s.error_message}" for s in view.steps
    )
    log = (up.var.parent / "up.log").read_text(errors="replace")[-3000:]
    return f"{view.status.value} {view.error_code}: {view.error_message}\nsteps: {steps}\n{log}"


def _o(output: Any) -> dict[str, Any]:
    assert isinstance(output, dict)
    return output


def _workspace(up: Up, run_id: str) -> Path:
    return up.var / "workspaces" / run_id


def _episode_types(up: Up, run_id: str) -> list[str]:
    return [e.episode_type for e in up.api.episodes(run_id)]


@pytest.mark.slow
def test_compile_approve_build_edits_a_real_file(up: Up) -> None:
    accepted = up.api.submit(
        {
            "recipe": "opencode-change",
            "objective": "E2E-EDIT: add a greeting file",
            # the happy path: a cold OpenCode under load may stay quiet past the
            # quick profile's 4 s before the compile turn starts, which is a stall there
            "policy_profile": "opencode",
        }
    )
    run_id = accepted.run_id
    view = up.api.wait(run_id, {"waiting_approval", "failed"}, 120)
    assert view.status.value == "waiting_approval", _why(up, view)
    assert view.plan_card is not None
    assert [s.driver_kind.value for s in view.plan_card.plan.steps] == ["opencode"]
    assert not _workspace(up, run_id).joinpath("greeting.txt").exists()  # plan agent: no edits

    up.approver.decide(run_id, True, view.plan_card.plan_digest)
    done = up.api.wait(run_id, {"succeeded", "failed"}, 120)
    assert done.status.value == "succeeded", _why(up, done)
    assert _workspace(up, run_id).joinpath("greeting.txt").read_bytes() == GREETING

    calls = up.api.ledger(run_id)
    assert [(c.step_id, c.target, c.status) for c in calls] == [
        ("@compile", "opencode", "completed"),
        ("greet", "opencode", "completed"),
    ]
    [step] = done.steps
    out = _o(step.output)
    pin = read_pin(WorkerSettings.from_env({}).opencode_dir)
    assert out["opencode"] == {"version": pin.version, "integrity": pin.integrity}
    digest = hashlib.sha256(GREETING).hexdigest()
    assert out["files"] == [{"path": "greeting.txt", "before": None, "after": digest}]
    kinds = _episode_types(up, run_id)
    for kind in ("opencode_tool", "opencode_file", "opencode_permission"):
        assert f"execution/{kind}" in kinds, kinds
    # the whole session is one OpenCode session: compile and build share it
    compile_call = calls[0]
    assert compile_call.op_key and first_prompts(up.model, marker_of(compile_call.op_key)) == 1
    replay = up.api.replay(run_id)
    assert replay.match is True, replay


@pytest.mark.slow
def test_stall_climbs_the_ladder_to_oc_timeout(up: Up) -> None:
    done = _run_plan(up, [_step("work", "STALL-STEP: write part.txt", ["STALL-NARROW: part one"])])
    assert done.status.value == "failed", _why(up, done)
    assert done.error_code == ErrorCode.OC_TIMEOUT.value
    [step] = done.steps
    out = _o(step.output)
    ladder = out["ladder"]
    assert [r["error_code"] for r in ladder] == ["oc_stalled", "oc_stalled"]
    for rung in ladder:
        diagnostics = rung["output"]["diagnostics"]
        assert diagnostics["session_status"] == {"type": "busy"}, (
            rung["error_message"],
            diagnostics,
        )
        assert 4 <= diagnostics["idle_s"] < 4 + 3  # detected within the limit (stall_s 4)
        assert rung["output"]["workspace_after"] == rung["output"]["workspace_before"]
    empty = take(_workspace(up, done.run_id)).digest
    assert out["workspace_after"] == out["workspace_before"] == empty
    assert not _workspace(up, done.run_id).joinpath("part.txt").exists()
    kinds = _episode_types(up, done.run_id)
    assert kinds.count("execution/opencode_stall") == 2
    assert "execution/timeout_ladder" in kinds
    calls = up.api.ledger(done.run_id)  # two turns, two op_keys, both finished as failed
    assert [(c.attempt, c.status, c.error_code) for c in calls] == [
        (1, "failed", "oc_stalled"),
        (2, "failed", "oc_stalled"),
    ]
    assert up.api.replay(done.run_id).match is True


@pytest.mark.slow
def test_narrowed_reprompt_rescues_the_step(up: Up) -> None:
    done = _run_plan(
        up, [_step("work", "SHRINK-STEP: write a.txt and b.txt", ["SHRINK-NARROW: a.txt only"])]
    )
    assert done.status.value == "succeeded", _why(up, done)
    ws = _workspace(up, done.run_id)
    assert ws.joinpath("a.txt").read_bytes() == b"a\n"
    assert not ws.joinpath("b.txt").exists()  # the stalled turn was undone
    [step] = done.steps
    out = _o(step.output)
    assert [r["error_code"] for r in out["ladder"]] == ["oc_stalled"]
    assert "SHRINK-NARROW" in out["narrowed_prompt"]
    assert "execution/timeout_ladder" in _episode_types(up, done.run_id)


@pytest.mark.slow
def test_a_refused_permission_is_a_security_episode(up: Up) -> None:
    done = _run_plan(up, [_step("look", "BASH-STEP: list the files")])
    assert done.status.value == "succeeded", done  # the model went on without the shell
    [step] = done.steps
    out = _o(step.output)
    asks = [a for a in out["activity"] if a["kind"] == "permission"]
    assert [(a["permission"], a["decision"]) for a in asks] == [("bash", "reject")]
    [tool] = [a for a in out["activity"] if a["kind"] == "tool"]
    assert tool["status"] == "error"
    assert "security_event/permission_denied" in _episode_types(up, done.run_id)


@pytest.mark.slow
def test_a_child_session_attempt_is_refused_and_recorded(up: Up) -> None:
    done = _run_plan(up, [_step("help", "CHILD-STEP: get a helper to do it")])
    assert done.status.value == "failed", _why(up, done)
    assert done.error_code == ErrorCode.CHILD_SESSION_REFUSED.value
    assert "security_event/child_session_refused" in _episode_types(up, done.run_id)


@pytest.mark.slow
def test_a_worker_killed_mid_turn_never_resends_the_turn(
    model: ScriptedModel, tmp_path: Path
) -> None:
    # its own database: the module's `gatehouse up` worker must not take this run
    require_backend("postgres")
    pg_url = fresh_database_url("postgres", tmp_path)
    try:
        _crash_mid_turn(pg_url, model, tmp_path)
    finally:
        drop_database(pg_url)


def _crash_mid_turn(pg_url: str, model: ScriptedModel, tmp_path: Path) -> None:
    env = {"GATEHOUSE_OPENCODE_MODEL_URL": model.base_url, "GATEHOUSE_OPENCODE_MODEL": "scripted"}
    plan = {
        "objective": "crash mid turn",
        "steps": [_step("crashy", "CRASH-STEP: write crash.txt")],
    }
    workspaces = tmp_path / "ws"
    with shim_client(pg_url) as client:
        r = client.post(
            "/intent",
            json={
                "recipe": "echo",
                "objective": "crash mid turn",
                "mode": "run-plan",
                "plan": plan,
                "policy_profile": PROFILE,
            },
        )
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
        assert client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
        crash = {"GATEHOUSE_CRASH_POINT": "mid_turn:crashy", **env}
        crashing = start_worker(pg_url, "oc-crash", workspaces, tmp_path / "a.log", crash)
        try:
            assert crashing.wait(timeout=120) == 137, (tmp_path / "a.log").read_text()
        finally:
            stop([crashing])
        recovering = start_worker(pg_url, "oc-crash", workspaces, tmp_path / "b.log", env)
        try:
            done = wait_for_status(
                lambda rid: client.get(f"/runs/{rid}").json(), run_id, {"succeeded", "failed"}, 120
            )
            _check_crash_run(client, model, run_id, workspaces, done, tmp_path)
        finally:
            stop([recovering])


def _check_crash_run(
    client: Any, model: ScriptedModel, run_id: str, workspaces: Path, done: Any, tmp_path: Path
) -> None:
    assert done["status"] == "succeeded", (done, (tmp_path / "b.log").read_text()[-3000:])
    assert (workspaces / run_id / "crash.txt").read_bytes() == b"crash\n"
    calls = client.get(f"/runs/{run_id}/ledger").json()["calls"]
    ours = [c for c in calls if c["step_id"] == "crashy"]
    # served from the session (its reply had finished) or undone and sent again
    # as attempt 2; on a loaded machine an OpenCode (the first worker's, before the
    # kill, or the recovering worker's fresh one) can go quiet past the profile's
    # 4 s stall limit, and that attempt is aborted and reverted like any stall.
    # Either way no op_key reached the model twice.
    outcomes = [(c["status"], c["error_code"]) for c in ours]
    stalled, interrupted = ("failed", "oc_stalled"), ("failed", "turn_interrupted")
    assert outcomes[-1:] == [("completed", None)], outcomes
    assert outcomes[:-1].count(interrupted) <= 1, outcomes  # one kill, one interruption
    assert all(o in (stalled, interrupted) for o in outcomes[:-1]), outcomes
    for call in ours:
        sent = first_prompts(model, marker_of(call["op_key"]))
        assert sent == 1 if call["error_code"] != "oc_stalled" else sent <= 1, (call, sent)
    replayed = client.post(f"/runs/{run_id}/replay", headers=client.people.auth("olga"))
    assert replayed.status_code == 200 and replayed.json()["match"] is True, replayed.text
