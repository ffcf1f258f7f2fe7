"""OpenCode in its sandbox, with its own permission checks switched off.

A real ``opencode serve`` (the pinned build) in the worker's bubblewrap sandbox,
configured to allow every tool everywhere (``allow`` for every permission class,
``external_directory`` included, in its config and in the session), is driven by
the scripted model to write outside its workspace (absolute paths, ``..``
paths, its bash tool) and to reach a loopback TCP canary that is not the model
provider. Nothing may land on the host, and the canary must see no connection,
while a control write inside the workspace succeeds and the model (reached
through the bridge) answers every turn. No part of the sandbox is mocked.

Run alone: ``.venv/bin/python -m pytest tests/security/opencode``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contracts import OpencodePolicy
from contracts.tool_pool import PERMISSION_CLASSES
from tests.support.opencode import require_opencode, write_call
from worker.handlers.opencode.supervisor import OpencodeServer, ServerSpec
from worker.handlers.opencode.turn import TurnSpec, run_turn
from worker.runtime import WorkerSettings
from worker.sandbox.server import server_sandbox
from worker.scripted_model import ScriptedModel, load_script

REPO = Path(__file__).resolve().parents[3]
SECRET = "GATEHOUSE_TEST_SECRET_" + uuid.uuid4().hex[:8]
# OpenCode's own checks off: everything allowed, except task (the contract forbids it)
WIDE_OPEN = OpencodePolicy(
    permissions={name: ("deny" if name == "task" else "allow") for name in PERMISSION_CLASSES},
    stall_s=20,
    ask_limit_s=5,
)


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command,
                                                          "description": "try"}}]}  # fmt: skip


class Canary:
    """A loopback TCP server that counts who connects to it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@dataclass
class Setup:
    root: Path
    canary_dir: Path
    repo_canary: Path
    install_canary: Path
    canary: Canary
    model: ScriptedModel
    server: OpencodeServer
    workspace_root: Path


def _script(root: Path, canary_dir: Path, repo_canary: Path, install_canary: Path,
            port: int) -> dict[str, Any]:  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    return {"turns": [
        {"match": "ESCAPE-WRITE", "replies": [
            write_call(str(canary_dir / "absolute.txt"), "escaped\n"),
            write_call("../../canary/dotdot.txt", "escaped\n"),
            write_call(str(repo_canary), "escaped\n"),
            write_call(str(install_canary), "escaped\n"),
            bash(f"touch {canary_dir}/touched; echo escaped > {canary_dir}/echoed;"
                 f" echo escaped > {repo_canary}; cd ../..; echo escaped > canary/cd.txt;"
                 f" echo escaped > {install_canary}"),
            write_call("inside.txt", "inside\n"),
            {"content": "done"},
        ]},
        {"match": "ESCAPE-NET", "replies": [
            bash(f"curl -sS -m 3 {url}; echo curl=$?;"
                 f" (echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1; echo devtcp=$?"),
            {"tool_calls": [{"name": "webfetch", "arguments": {"url": url, "format": "text"}}]},
            bash(f"env; cat {REPO}/pyproject.toml; echo cat=$?; ls /; cat /etc/hosts"),
            {"content": "done"},
        ]},
    ]}  # fmt: skip


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    require_opencode()
    found = server_sandbox()
    if isinstance(found, str):
        pytest.skip(f"OpenCode cannot be sandboxed on this machine: {found}")
    root = tmp_path_factory.mktemp("ocbox")
    canary_dir = root / "canary"
    canary_dir.mkdir()
    tag = uuid.uuid4().hex[:8]
    repo_canary = REPO / f"gatehouse-canary-{tag}.txt"
    settings = WorkerSettings.from_env({})
    install_canary = settings.opencode_dir / "node_modules" / f"gatehouse-canary-{tag}.txt"
    canary = Canary()
    model = ScriptedModel(load_script(
        _script(root, canary_dir, repo_canary, install_canary, canary.port))).start()  # fmt: skip
    os.environ[SECRET] = "do-not-leak"  # in the worker's environment, never the server's
    spec = ServerSpec(opencode_dir=settings.opencode_dir, home=root / "home",
                      workspace_root=root / "ws", model_url=model.base_url, model="scripted",
                      api_key=None, policy=WIDE_OPEN)  # fmt: skip
    server = OpencodeServer(spec)
    try:
        server.ensure_running()
        yield Setup(root, canary_dir, repo_canary, install_canary, canary, model, server,
                    root / "ws")  # fmt: skip
    finally:
        server.stop()
        model.stop()
        canary.close()
        del os.environ[SECRET]
        repo_canary.unlink(missing_ok=True)
        install_canary.unlink(missing_ok=True)


def _turn(setup: Setup, prompt: str) -> tuple[dict[str, Any], TurnSpec]:
    run_id = "run-" + uuid.uuid4().hex[:8]
    workspace = setup.workspace_root / run_id
    workspace.mkdir(parents=True)
    spec = TurnSpec(run_id=run_id, step_id="s1", op_key=uuid.uuid4().hex * 2,
                    workspace=workspace, snapshot_path=setup.root / "snap" / f"{run_id}.json",
                    agent="build", prompt=prompt, schema=None, policy=WIDE_OPEN, timeout_s=120,
                    model="scripted", max_output_bytes=1_000_000)  # fmt: skip
    result = run_turn(setup.server, spec)
    assert result.ok, result
    out: dict[str, Any] = result.output
    return out, spec


def _tool_results(model: ScriptedModel, marker: str) -> list[str]:
    """What the tools answered, as OpenCode sent it back to the model, for one turn."""
    for body in reversed(model.chat_requests()):
        raw: Any = body.get("messages")
        messages: list[dict[str, Any]] = [m for m in raw or [] if isinstance(m, dict)]
        if any(m.get("role") == "user" and marker in json.dumps(m) for m in messages):
            return [json.dumps(m.get("content")) for m in messages if m.get("role") == "tool"]
    return []


def test_the_server_runs_in_the_sandbox_and_says_so(setup: Setup) -> None:
    assert setup.server.sandbox["tool"] == "bubblewrap"
    assert setup.server.sandbox["capabilities"] == "none"
    assert str(setup.model.base_url).split("//")[1].split("/")[0] in str(
        setup.server.sandbox["network"]
    )
    cmdline = Path(f"/proc/{setup.server.pid()}/cmdline").read_bytes().split(b"\0")
    assert cmdline[0].endswith(b"bwrap") and b"--unshare-all" in cmdline


def test_no_write_lands_outside_the_workspace_with_every_permission_allowed(
    setup: Setup,
) -> None:
    out, spec = _turn(setup, "ESCAPE-WRITE")
    assert out["sandbox"]["tool"] == "bubblewrap"
    # the control: the same tools, inside the workspace, work
    assert (spec.workspace / "inside.txt").read_text() == "inside\n"
    # nothing outside it on the host
    assert sorted(p.name for p in setup.canary_dir.iterdir()) == []
    assert not setup.repo_canary.exists()
    assert not setup.install_canary.exists()
    assert not (setup.root / "canary" / "cd.txt").exists()
    # OpenCode's own checks did not stop a single call: no ask, no rejection;
    # the kernel did (or the write went to the sandbox's own private files)
    activity = out["activity"]
    assert [a for a in activity if a["kind"] == "permission"] == []
    tools = [a for a in activity if a["kind"] == "tool"]
    assert [t["tool"] for t in tools] == ["write"] * 4 + ["bash", "write"]
    for tool in tools:
        assert "rejected" not in str(tool.get("error", "")).lower()
        assert "permission" not in str(tool.get("error", "")).lower()
    answers = _tool_results(setup.model, spec.op_key)
    # the OpenCode install is read-only (the other paths are the sandbox's private
    # tmpfs: OpenCode "wrote" them, and they vanished with nothing on the host)
    assert "FileSystem.writeFile" in answers[3]
    assert "Read-only file system" in answers[4]


def test_nothing_but_the_provider_is_reachable_and_nothing_of_the_worker_is_seen(
    setup: Setup,
) -> None:
    with socket.create_connection(("127.0.0.1", setup.canary.port), timeout=5):
        pass  # the canary answers on the host...
    deadline = 50
    while setup.canary.accepted < 1 and deadline:
        threading.Event().wait(0.1)
        deadline -= 1
    assert setup.canary.accepted == 1
    out, spec = _turn(setup, "ESCAPE-NET")  # ...the model answered every step of it
    assert setup.canary.accepted == 1  # ...and saw nothing from the sandbox
    tools = [a for a in out["activity"] if a["kind"] == "tool"]
    assert [t["tool"] for t in tools] == ["bash", "webfetch", "bash"]
    assert [a for a in out["activity"] if a["kind"] == "permission"] == []
    answers = _tool_results(setup.model, spec.op_key)
    assert len(answers) == 3
    net, fetch, seen = answers
    assert "curl=7" in net  # could not connect
    assert "devtcp=1" in net
    assert "Transport error" in fetch, fetch
    assert SECRET not in seen  # the worker's environment stays out
    assert "cat=1" in seen  # the project is not there to read
    assert "127.0.0.1\\tlocalhost" in seen  # the sandbox's own /etc/hosts
