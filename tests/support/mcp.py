"""MCP servers and policies for the mcp_proxy tests.

``McpHttpServer`` serves ``tests/support/mcp_server.py``'s server over streamable
HTTP on a loopback port, in a thread of the test (its ``calls`` count what the
``note`` tool received, across workers); ``stdio_server`` copies the script into
a folder of the test and names it as a stdio connector's server. ``write_policies``
pins the connectors against the live servers (``worker.mcp_pin.pin_pool``) and
writes an ``mcp-test`` tool pool and profile into a folder for
``GATEHOUSE_EXTRA_POLICIES``.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from tests.support.mcp_server import build
from worker.mcp_pin import pin_pool
from worker.sandbox.bwrap import current as current_sandbox

__all__ = ["POOL_ID", "McpHttpServer", "http_connector", "stdio_connector", "write_policies"]

POOL_ID = "mcp-test"
REPO = Path(__file__).resolve().parents[2]
LIMITS = {"timeout_s": 20, "max_output_bytes": 65536}


class McpHttpServer:
    """``with McpHttpServer() as url:`` the test MCP server at ``url`` (``…/mcp``)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.changed = False
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        app = build(lambda: self.changed, self.calls.append).streamable_http_app(
            stateless_http=True, json_response=True
        )
        config = uvicorn.Config(app, log_level="warning", lifespan="on", http="h11")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def __enter__(self) -> McpHttpServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def http_connector(url: str, read_only: list[str] | None = None) -> dict[str, Any]:
    return {
        "connector_id": "mcp-http",
        "driver_kind": "mcp_proxy",
        "description": "The test MCP server over streamable HTTP on loopback.",
        "limits": LIMITS,
        "destinations": [
            {
                "scheme": "http",
                "host": "127.0.0.1",
                "ports": None,
                "path_prefix": "/mcp",
                "allow_private": True,
            }
        ],
        "mcp": {
            "transport": "streamable_http",
            "url": url,
            "tools": [{"name": "add"}, {"name": "note"}],
            "read_only_tools": read_only if read_only is not None else ["add"],
        },
    }


def stdio_connector(folder: Path) -> dict[str, Any]:
    """A stdio connector for a copy of the test server in ``folder`` (a ``variant``
    file there turns it into a rug pull)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "mcp_server.py"
    shutil.copy(REPO / "tests" / "support" / "mcp_server.py", script)
    return {
        "connector_id": "mcp-stdio",
        "driver_kind": "mcp_proxy",
        "description": "The test MCP server over stdio, in the sandbox.",
        "limits": LIMITS,
        "mcp": {
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(script)],
            # the interpreter and its packages (the venv, in the repo), and the script
            "read_only_paths": sorted({str(REPO), str(Path(sys.base_prefix)), str(folder)}),
            "tools": [{"name": "add"}, {"name": "note"}],
            "read_only_tools": ["add"],
        },
    }


def write_policies(folder: Path, connectors: list[dict[str, Any]]) -> Path:
    """Pin ``connectors`` against their live servers; write the pool and a profile
    allowing mcp_proxy under ``folder``; return ``folder``."""
    pool: Any = {
        "schema_id": "ds.gatehouse_tool_pool_v1",
        "tool_pool_id": POOL_ID,
        "version": "1",
        "description": "MCP servers the tests start.",
        "connectors": connectors,
    }
    found = current_sandbox()
    pinned, problems = pin_pool(pool, None if isinstance(found, str) else found, folder / "pin")
    assert not [p for p in problems if "offers no tool" in p], problems
    (folder / "tool_pools").mkdir(parents=True, exist_ok=True)
    (folder / "tool_pools" / f"{POOL_ID}.json").write_text(json.dumps(pinned, indent=2))
    profile = json.loads((REPO / "policies" / "profiles" / "default.json").read_text())
    profile.update(
        profile_id=POOL_ID,
        description="The default profile, allowing mcp_proxy steps too.",
        allowed_driver_kinds=["noop", "mcp_proxy"],
        # a machine without bubblewrap still runs the stdio server (bare); with one, the
        # sandbox is used whatever this says (tests/security/mcp holds it to that)
        unsandboxed_shell="allowed",
    )
    (folder / "profiles").mkdir(parents=True, exist_ok=True)
    (folder / "profiles" / f"{POOL_ID}.json").write_text(json.dumps(profile, indent=2))
    return folder
