"""A stdio MCP server runs in the shell sandbox: no network, only its own folder writable.

The test server's ``probe`` tool tries to connect to a port listening on this
machine's loopback and to write into the folder its code was read from; both are
refused in the sandbox. Without a sandbox a stdio step is refused
(``sandbox_unavailable``) unless the profile allows it in so many words.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from contracts import Connector, ErrorCode
from tests.support.handler_context import handler_context
from tests.support.mcp import stdio_connector
from worker.coordinator.envelopes import build_envelope
from worker.handlers import mcp_proxy
from worker.mcp_pin import pin_pool
from worker.sandbox.bwrap import current as current_sandbox

OP_KEY = "0" * 64
OFF = "GATEHOUSE_BWRAP=off: this worker runs no sandbox"


def pinned(tmp_path: Path, tools: list[str]) -> Connector:
    raw = stdio_connector(tmp_path / "srv")
    raw["mcp"]["tools"] = [{"name": t} for t in tools]
    raw["mcp"]["read_only_tools"] = []
    found = current_sandbox()
    pool: Any = {"connectors": [raw]}
    fresh, _ = pin_pool(pool, None if isinstance(found, str) else found, tmp_path / "pin")
    connectors = fresh["connectors"]
    assert isinstance(connectors, list)
    return Connector.model_validate(connectors[0])


def call(
    connector: Connector, workspace: Path, tool: str, arguments: dict[str, Any], **extra: Any
) -> Any:
    workspace.mkdir(parents=True, exist_ok=True)
    envelope = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                              connector=connector, arguments={"tool": tool, "arguments": arguments},
                              **extra).bound(workspace)  # fmt: skip
    return mcp_proxy.run(envelope, handler_context())


def test_in_the_sandbox_the_server_reaches_no_network_and_writes_only_its_folder(
    tmp_path: Path,
) -> None:
    if isinstance(current_sandbox(), str):
        pytest.skip(f"no sandbox here: {current_sandbox()}")
    connector = pinned(tmp_path, ["probe"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    outside = tmp_path / "srv" / "escaped.txt"  # where the server's code is: read-only
    try:
        result = call(connector, tmp_path / "ws", "probe",
                      {"host": "127.0.0.1", "port": listener.getsockname()[1],
                       "path": str(outside)})  # fmt: skip
    finally:
        listener.close()
    assert result.status == "success", result
    assert result.output["sandbox"]["tool"] == "bubblewrap"
    said = result.output["structured_content"]
    assert said["connect"].startswith("blocked"), said
    assert said["write"].startswith("blocked"), said
    assert not outside.exists()
    notes = tmp_path / "ws" / ".mcp" / "mcp-stdio" / "notes.txt"  # its own folder: writable
    assert notes.read_text().startswith("probe ")


def test_without_a_sandbox_a_stdio_server_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = pinned(tmp_path, ["note"])
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    result = call(connector, tmp_path / "ws", "note", {"text": "bare"})
    assert result.error is not None and result.error.code == ErrorCode.SANDBOX_UNAVAILABLE.value
    assert not (tmp_path / "ws" / ".mcp").exists()  # nothing started
    allowed = call(
        connector, tmp_path / "ws", "note", {"text": "bare"}, unsandboxed_shell="allowed"
    )
    assert allowed.status == "success", allowed
    assert allowed.output["sandbox"] == {"tool": "none", "reason": OFF, "allowed_by": "profile"}


def test_a_large_result_is_capped_and_nul_never_reaches_the_ledger(tmp_path: Path) -> None:
    connector = pinned(tmp_path, ["note"])
    assert connector.limits is not None
    small = connector.model_copy(
        update={"limits": connector.limits.model_copy(update={"max_output_bytes": 1000})}
    )
    result = call(small, tmp_path / "ws", "note", {"text": "\x00" + "x" * 5000},
                  unsandboxed_shell="allowed")  # fmt: skip
    assert result.status == "success", result
    assert result.output["truncated"] is True and result.output["bytes"] > 5000
    [block] = result.output["content"]
    assert len(block["text"].encode()) <= 1000
    assert "\\u0000" not in json.dumps(result.output)
