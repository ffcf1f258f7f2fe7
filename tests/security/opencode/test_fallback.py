"""Without a sandbox OpenCode work is refused, unless the profile allows it in so many
words; and how the model provider is routed into the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import Connector, DriverKind, ErrorCode, Limits
from tests.support.handler_context import handler_context
from tests.support.opencode import require_opencode
from worker.coordinator.envelopes import build_envelope
from worker.handlers import opencode as opencode_handler
from worker.handlers.opencode.runner import sandbox_refusal
from worker.handlers.opencode.supervisor import OpencodeServer, ServerSpec
from worker.runtime import WorkerSettings
from worker.sandbox.server import route_of
from worker.scripted_model import ScriptedModel, load_script

OP_KEY = "ab" * 32
OFF = "GATEHOUSE_BWRAP=off: this worker runs no sandbox"


def _connector() -> Connector:
    return Connector(
        connector_id="workspace-opencode",
        driver_kind=DriverKind.OPENCODE,
        description="edit",
        limits=Limits(timeout_s=60, max_output_bytes=4096),
    )


def test_an_opencode_step_is_refused_without_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    envelope = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                              connector=_connector(), arguments={"prompt": "edit"})  # fmt: skip
    result = opencode_handler.run(
        envelope, handler_context()
    )  # refused before any server or workspace
    assert result.status == "error"
    assert result.error is not None and result.error.code == ErrorCode.SANDBOX_UNAVAILABLE.value
    assert result.output == {"sandbox": {"tool": "none", "reason": OFF}}
    assert (
        opencode_handler.reconcile_turn(envelope, handler_context()) is None
    )  # made again, and refused


def test_the_profile_may_allow_it_and_the_envelope_says_so_only_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    refused = sandbox_refusal(False)
    assert refused is not None and refused.code is ErrorCode.SANDBOX_UNAVAILABLE
    assert sandbox_refusal(True) is None
    allowed = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                             connector=_connector(), arguments={},
                             unsandboxed_opencode="allowed")  # fmt: skip
    ext = allowed.model_dump(mode="json")["extensions"]["gatehouse"]
    assert ext["unsandboxed_opencode"] == "allowed"
    plain = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                           connector=_connector(), arguments={})  # fmt: skip
    ext = plain.model_dump(mode="json")["extensions"]["gatehouse"]
    assert "unsandboxed_opencode" not in ext and "unsandboxed_shell" not in ext


def test_without_a_sandbox_the_server_runs_bare_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_opencode()
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    with ScriptedModel(load_script({"replies": [{"content": "hi"}]})) as model:
        spec = ServerSpec(opencode_dir=WorkerSettings.from_env({}).opencode_dir,
                          home=tmp_path / "home", workspace_root=tmp_path / "ws",
                          model_url=model.base_url, model="scripted", api_key=None)  # fmt: skip
        server = OpencodeServer(spec)
        try:
            server.ensure_running()
            assert server.sandbox == {"tool": "none", "reason": OFF}
            cmdline = Path(f"/proc/{server.pid()}/cmdline").read_bytes()
            assert b"bwrap" not in cmdline
        finally:
            server.stop()


@pytest.mark.parametrize(
    ("url", "host", "port", "inside", "name"),
    [
        ("http://127.0.0.1:8091/v1", "127.0.0.1", 8091, "http://127.0.0.1:8091/v1", None),
        ("https://api.example.com/v1", "api.example.com", 443,
         "https://api.example.com:10443/v1", "api.example.com"),
        ("http://localhost:80/v1", "localhost", 80, "http://localhost:10080/v1", "localhost"),
        ("http://10.0.0.5:8000/v1", "10.0.0.5", 8000, "http://127.0.0.1:8000/v1", None),
    ],
)  # fmt: skip
def test_the_provider_route(url: str, host: str, port: int, inside: str, name: str | None) -> None:
    route = route_of(url)
    assert (route.host, route.port, route.inside_url, route.hosts_name) == (host, port, inside,
                                                                             name)  # fmt: skip
    assert route.inside_port >= 1024
