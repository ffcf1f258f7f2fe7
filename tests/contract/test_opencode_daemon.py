"""The opencode driver against a real ``opencode serve`` (the pinned build) and
the scripted model: the daemon contract Gatehouse relies on.

Run alone with ``mise run -f oc:daemon:contract``. One server for the module;
each test works in its own run directory (its own session).
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from contracts import ErrorCode, GatehouseError, OpencodePolicy
from contracts._schemas import render_schema
from contracts.plan import PLAN_SCHEMA_ID
from tests.support.opencode import first_prompts, require_opencode, write_call
from worker.handlers import HandlerResult
from worker.handlers.opencode import workspace
from worker.handlers.opencode.ban import refuse_parent
from worker.handlers.opencode.client import OpencodeClient
from worker.handlers.opencode.pin import read_pin
from worker.handlers.opencode.runner import server_of, turn_spec
from worker.handlers.opencode.supervisor import REGISTRY_ENV, OpencodeServer, stop_running_server
from worker.handlers.opencode.turn import TurnSpec, marker_of, reconcile, run_turn, session_for
from worker.runtime import WorkerSettings
from worker.scripted_model import ScriptedModel, load_script

PLAN = {
    "schema_id": "env.mova_agent_plan_v1",
    "objective": "add a greeting",
    "steps": [
        {
            "step_id": "greet",
            "verb": "edit",
            "connector_id": "workspace-opencode",
            "driver_kind": "opencode",
            "input": {"prompt": "write greeting.txt"},
        }
    ],
}


SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "COMPILE-IT",
            "replies": [{"tool_calls": [{"name": "StructuredOutput", "arguments": PLAN}]}],
        },
        {
            "match": "EDIT-IT",
            "replies": [write_call("greeting.txt", "hello\n"), {"content": "done"}],
        },
        {
            "match": "BASH-IT",
            "replies": [
                {
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "ls", "description": "list"}}
                    ]
                },
                {"content": "could not list"},
            ],
        },
        {
            "match": "STALL-IT",
            "replies": [write_call("half.txt", "half\n"), {"content": "thinking", "stall": True}],
        },
        {
            "match": "SLOW-IT",
            "replies": [write_call("slow.txt", "slow\n"), {"content": "done", "delay_s": 3}],
        },
        {
            "match": "TASK-IT",
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "task",
                            "arguments": {
                                "description": "sub",
                                "prompt": "x",
                                "subagent_type": "general",
                            },
                        }
                    ]
                },
                {"content": "after"},
            ],
        },
    ]
}

QUICK = OpencodePolicy(stall_s=3, ask_limit_s=3)


def _o(result: HandlerResult) -> dict[str, Any]:
    out: dict[str, Any] = result.output
    return out


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(load_script(SCRIPT)) as m:
        yield m


@pytest.fixture(scope="module")
def settings(model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> WorkerSettings:
    root = tmp_path_factory.mktemp("oc")
    require_opencode()
    return WorkerSettings.from_env(
        {
            "GATEHOUSE_WORKSPACE_ROOT": str(root / "ws"),
            "GATEHOUSE_OPENCODE_STATE": str(root / "state"),
            "GATEHOUSE_OPENCODE_MODEL_URL": model.base_url,
            "GATEHOUSE_OPENCODE_MODEL": "scripted",
            "GATEHOUSE_EXECUTOR_ID": "contract",
        }
    )


class _Registry:
    """A stand-in npm registry on loopback that only counts what asks it for code."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry.asked.append(self.path)
                self.send_response(404)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def registry() -> Iterator[_Registry]:
    found = _Registry()
    os.environ[REGISTRY_ENV] = found.url
    try:
        yield found
    finally:
        del os.environ[REGISTRY_ENV]
        found.httpd.shutdown()
        found.httpd.server_close()


@pytest.fixture(scope="module")
def server(settings: WorkerSettings, registry: _Registry) -> Iterator[OpencodeServer]:
    yield server_of(settings)
    stop_running_server()


def _spec(settings: WorkerSettings, prompt: str, **kw: Any) -> TurnSpec:
    args: dict[str, Any] = {
        "run_id": "run-" + uuid.uuid4().hex[:8],
        "step_id": "s1",
        "op_key": uuid.uuid4().hex * 2,
        "agent": "build",
        "prompt": prompt,
        "schema": None,
        "policy": QUICK,
        "timeout_s": 60,
        "max_output_bytes": 100_000,
    }
    args.update(kw)
    return turn_spec(settings, **args)


def _client(server: OpencodeServer, spec: TurnSpec) -> OpencodeClient:
    return OpencodeClient(server.url, server.password, spec.workspace)


def test_server_is_private_and_pinned(server: OpencodeServer, settings: WorkerSettings) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert httpx.get(f"{server.url}/session", timeout=5).status_code == 401  # password
    assert server.pin == read_pin(settings.opencode_dir)
    home = settings.opencode_state / "contract"
    assert (home / "opencode.pid").read_text() == str(server.pid())


def test_session_create_and_the_parent_ban(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "unused")
    client = _client(server, spec)
    sid = session_for(client, spec.run_id, QUICK)
    assert sid.startswith("ses")
    assert session_for(client, spec.run_id, QUICK) == sid  # one session per run
    # The server itself would make a child: the ban has to be Gatehouse's.
    with pytest.raises(GatehouseError) as banned:
        refuse_parent({"title": "x", "parentID": sid})
    assert banned.value.code is ErrorCode.CHILD_SESSION_REFUSED
    assert [s["id"] for s in client.sessions()] == [sid]


def test_structured_compile_with_the_plan_agent(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "COMPILE-IT", agent="plan", schema=render_schema(PLAN_SCHEMA_ID))
    result = run_turn(server, spec)
    assert result.ok, result
    assert _o(result)["structured"] == PLAN
    assert _o(result)["agent"] == "plan"
    assert _o(result)["files"] == []


def test_build_edits_a_real_file_and_answers_the_ask(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "EDIT-IT")
    result = run_turn(server, spec)
    assert result.ok, result
    data = (spec.workspace / "greeting.txt").read_bytes()
    assert data == b"hello\n"
    digest = hashlib.sha256(data).hexdigest()
    assert _o(result)["files"] == [{"path": "greeting.txt", "before": None, "after": digest}]
    kinds = [a["kind"] for a in _o(result)["activity"]]
    assert kinds.count("permission") == 1 and "tool" in kinds and "file" in kinds
    [ask] = [a for a in _o(result)["activity"] if a["kind"] == "permission"]
    assert ask["permission"] == "edit" and ask["decision"] == "once"
    assert result.artifacts and result.artifacts[0].media_type == "application/x-ndjson"


def test_denied_ask_refuses_the_tool_and_leaves_nothing_pending(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "BASH-IT")
    result = run_turn(server, spec)
    assert result.ok, result  # the model carried on without the tool
    [ask] = [a for a in _o(result)["activity"] if a["kind"] == "permission"]
    assert ask["permission"] == "bash" and ask["decision"] == "reject"
    [tool] = [a for a in _o(result)["activity"] if a["kind"] == "tool"]
    assert tool["status"] == "error" and "rejected" in str(tool["error"])
    assert _client(server, spec).permissions() == []


def test_stall_is_detected_aborted_and_reverted(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "STALL-IT")
    (spec.workspace / "keep.txt").write_text("keep\n")
    before = workspace.take(spec.workspace).digest
    started = time.monotonic()
    result = run_turn(server, spec)
    took = time.monotonic() - started
    assert result.error_code is ErrorCode.OC_STALLED, result
    diagnostics = _o(result)["diagnostics"]
    assert diagnostics["session_status"] == {"type": "busy"}  # stuck busy, no events
    assert diagnostics["pending_permissions"] == []
    assert diagnostics["last_events"]
    assert took < QUICK.stall_s + 15
    assert _o(result)["workspace_before"] == before == _o(result)["workspace_after"]
    assert workspace.take(spec.workspace).digest == before
    assert not (spec.workspace / "half.txt").exists()
    client = _client(server, spec)
    status = client.statuses().get(_o(result)["session_id"], {"type": "idle"})
    assert status == {"type": "idle"}  # aborted: the session is not left busy


def test_child_session_on_the_stream_aborts_the_turn(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "SLOW-IT")
    client = _client(server, spec)
    sid = session_for(client, spec.run_id, QUICK)

    def make_child() -> None:  # someone else makes a child session mid-turn
        time.sleep(1.0)
        httpx.post(
            f"{server.url}/session",
            params={"directory": str(spec.workspace)},
            json={"parentID": sid, "title": "sneaky"},
            auth=("opencode", server.password),
            timeout=10,
        )

    threading.Thread(target=make_child, daemon=True).start()
    result = run_turn(server, spec)
    assert result.error_code is ErrorCode.CHILD_SESSION_REFUSED, result
    assert [a for a in _o(result)["activity"] if a["kind"] == "child_session"]
    assert not (spec.workspace / "slow.txt").exists()


def test_task_tool_is_denied_and_an_attempt_refused(
    server: OpencodeServer, settings: WorkerSettings
) -> None:
    spec = _spec(settings, "TASK-IT")
    result = run_turn(server, spec)
    client = _client(server, spec)
    sessions = client.sessions()
    assert all(s.get("title") == f"gatehouse run {spec.run_id}" for s in sessions)
    assert result.error_code is ErrorCode.CHILD_SESSION_REFUSED, result
    [attempt] = [a for a in _o(result)["activity"] if a["kind"] == "child_session"]
    assert "task" in attempt["session_id"]


def test_reconcile_serves_a_finished_turn_without_resending(
    server: OpencodeServer, settings: WorkerSettings, model: ScriptedModel
) -> None:
    spec = _spec(settings, "EDIT-IT")
    first = run_turn(server, spec)
    assert first.ok
    again = reconcile(server, spec)  # as if the worker died before recording it
    assert again is not None and again.ok and _o(again)["reconciled"] is True
    assert _o(again)["reply"] == _o(first)["reply"]
    assert first_prompts(model, marker_of(spec.op_key)) == 1


def test_reconcile_undoes_a_half_turn(server: OpencodeServer, settings: WorkerSettings) -> None:
    spec = _spec(settings, "SLOW-IT")
    before = workspace.take(spec.workspace)
    before.save(spec.snapshot_path)
    client = _client(server, spec)
    sid = session_for(client, spec.run_id, QUICK)
    client.prompt_async(
        sid,
        {
            "agent": "build",
            "parts": [{"type": "text", "text": f"{marker_of(spec.op_key)}\nSLOW-IT"}],
        },
    )
    deadline = time.monotonic() + 20
    while not (spec.workspace / "slow.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    settled = reconcile(server, spec)  # mid-turn: the reply is not finished
    assert settled is not None and settled.error_code is ErrorCode.TURN_INTERRUPTED
    assert _o(settled)["prompt_seen_by_server"] is True
    assert workspace.take(spec.workspace).digest == before.digest
    assert reconcile(server, _spec(settings, "never sent")) is None  # no snapshot: never sent


def test_watchdog_restarts_a_dead_server(server: OpencodeServer) -> None:
    pid = server.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (server.pid() == pid or not server.alive()):
        time.sleep(0.2)
    assert server.alive() and server.pid() != pid
    assert httpx.get(
        f"{server.url}/session", auth=("opencode", server.password), timeout=5
    ).is_success


def test_a_server_and_its_turns_fetch_no_code(
    server: OpencodeServer, settings: WorkerSettings, registry: _Registry
) -> None:
    """After every turn above (compiles, edits, asks, stalls, a restart), OpenCode has
    asked no package registry for anything: what it would install comes from the
    pinned set-up, and its provider is built in."""
    time.sleep(2)  # OpenCode's background install would have asked by now
    assert registry.asked == []
    seeded = settings.opencode_state / "contract" / ".config" / "opencode"
    plugin = seeded / "node_modules" / "@opencode-ai" / "plugin"
    assert plugin.is_symlink() and (plugin / "package.json").is_file()
    assert not (settings.opencode_state / "contract" / ".cache" / "opencode" / "packages").exists()
