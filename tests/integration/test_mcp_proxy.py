"""mcp_proxy steps against real MCP servers the test starts (``tests/support/mcp.py``).

One server over streamable HTTP on loopback, one over stdio (in the sandbox when
this machine has one), both pinned into an ``mcp-test`` tool pool read through
``GATEHOUSE_EXTRA_POLICIES``. A plan calling a tool on each runs and its evidence
names server, tool and pin; the stack replays every run from its ledger with the
network guard on at teardown. A tool off the allowlist and arguments that break
the pinned schema are refused at submit, before any approval; a server that
changes a tool after pinning is refused at execution (``mcp_tool_changed``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.bundle_verify import verify_bundle
from ledger.signing import generate_key, load_verify_key
from policies import catalog
from shim.cli import main
from tests.support.mcp import (
    POOL_ID,
    McpHttpServer,
    http_connector,
    stdio_connector,
    write_policies,
)
from tests.support.plans import digest_of_plan
from tests.support.stack import Stack, running_stack
from worker.sandbox.bwrap import current as current_sandbox


def clear_catalog() -> None:
    catalog.reload()  # re-read with the extra policies


class Mcp:
    def __init__(self, stack: Stack, http: McpHttpServer, folder: Path) -> None:
        self.stack, self.http, self.folder = stack, http, folder

    @property
    def pool(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            (self.folder / "tool_pools" / f"{POOL_ID}.json").read_text()
        )
        return out


@pytest.fixture(scope="module")
def mcp(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mcp]:
    root = tmp_path_factory.mktemp(f"mcp-{backend}")
    with McpHttpServer() as http, pytest.MonkeyPatch.context() as patch:
        folder = write_policies(
            root / "policies", [http_connector(http.url), stdio_connector(root / "srv")]
        )
        patch.setenv(catalog.EXTRA_POLICIES_ENV, str(folder))
        clear_catalog()
        (root / "stack").mkdir()
        try:
            with running_stack(backend, root / "stack") as stack:
                yield Mcp(stack, http, folder)
        finally:
            patch.delenv(catalog.EXTRA_POLICIES_ENV)
            clear_catalog()


def call(step_id: str, connector: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "run",
        "connector_id": connector,
        "driver_kind": "mcp_proxy",
        "input": {"tool": tool, "arguments": arguments},
    }


def intent(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "recipe": "echo",
        "objective": "mcp",
        "mode": "run-plan",
        "policy_profile": POOL_ID,
        "tool_pool": POOL_ID,
        "plan": {"objective": "mcp", "steps": list(steps)},
    }


def approve_and_wait(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    r = stack.submit(body)
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(body["plan"])})
    assert ok.status_code == 200, ok.text
    return stack.wait(run_id, {"succeeded", "failed", "needs_operator"})


def ledger(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    r = stack.client.get(f"/runs/{run_id}/ledger")
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["calls"]
    return out


def test_a_plan_calling_two_mcp_tools_runs_and_names_server_tool_and_pin(mcp: Mcp) -> None:
    stack = mcp.stack
    before = len(mcp.http.calls)
    run = approve_and_wait(
        stack,
        intent(
            call("sum", "mcp-http", "add", {"a": 2, "b": 3}),
            call("keep", "mcp-stdio", "note", {"text": "from the plan"}),
            call("keep-http", "mcp-http", "note", {"text": "over http"}),
        ),
    )
    assert run["status"] == "succeeded", run
    assert mcp.http.calls[before:] == ["add 2 3", "over http"]
    pins = {
        (c["connector_id"], t["name"]): t["digest"]
        for c in mcp.pool["connectors"]
        for t in c["mcp"]["tools"]
    }
    steps = {s["step_id"]: s for s in stack.run(run["run_id"])["steps"]}
    summed = steps["sum"]["output"]
    assert summed["server"] == mcp.http.url and summed["transport"] == "streamable_http"
    assert summed["tool"] == "add" and summed["pin"] == pins[("mcp-http", "add")]
    assert summed["channel"] == "system_log" and summed["is_error"] is False
    assert summed["structured_content"] == {"result": 5}
    kept = steps["keep"]["output"]
    assert kept["transport"] == "stdio" and kept["pin"] == pins[("mcp-stdio", "note")]
    assert kept["content"] == [{"type": "text", "text": "noted: from the plan"}]
    sandboxed = not isinstance(current_sandbox(), str)
    assert kept["sandbox"]["tool"] == ("bubblewrap" if sandboxed else "none")
    calls = [c for c in ledger(stack, run["run_id"]) if c["step_id"] in steps]
    assert {c["status"] for c in calls} == {"completed"} and len(calls) == 3
    replayed = stack.client.post(f"/runs/{run['run_id']}/replay", headers=stack.auth("olga"))
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["match"] is True
    # the signed evidence bundle names each server, tool and pin (request and response)
    key, pub, bundle = mcp.folder / "k.pem", mcp.folder / "k.pub.pem", mcp.folder / "b.json"
    generate_key(key, pub)
    with pytest.raises(SystemExit) as done:
        main(["evidence", "export", run["run_id"], "-o", str(bundle), "--key", str(key),
              "--database-url", stack.database_url])  # fmt: skip
    assert done.value.code == 0
    raw = bundle.read_bytes()
    assert verify_bundle(raw, load_verify_key(pub.read_bytes())).ok
    text = raw.decode()
    for (_, tool), digest in pins.items():
        assert text.count(digest) >= 2, tool  # the request's pin and the output's
    assert mcp.http.url in text and mcp.pool["connectors"][1]["mcp"]["command"] in text


@pytest.mark.parametrize(
    ("step", "code"),
    [
        (call("x", "mcp-http", "shutdown_everything", {}), "mcp_tool_not_allowed"),
        (call("x", "mcp-stdio", "rm", {}), "mcp_tool_not_allowed"),
        (call("x", "mcp-http", "add", {"a": "two", "b": 3}), "plan_invalid"),
        (call("x", "mcp-http", "add", {"a": 2}), "plan_invalid"),
        (call("x", "mcp-stdio", "note", {"wait_s": 1}), "plan_invalid"),
    ],
)
def test_refused_at_submit_before_any_approval(mcp: Mcp, step: dict[str, Any], code: str) -> None:
    r = mcp.stack.submit(intent(step))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == code


def check_pins(mcp: Mcp) -> subprocess.CompletedProcess[str]:
    """``gatehouse mcp-pin POOL`` (no --write): the pins against the live servers."""
    pool = mcp.folder / "tool_pools" / f"{POOL_ID}.json"
    gatehouse = Path(sys.executable).with_name("gatehouse")
    return subprocess.run(
        [str(gatehouse), "mcp-pin", str(pool)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_tool_changed_after_pinning_is_refused(mcp: Mcp) -> None:
    stack = mcp.stack
    before = len(mcp.http.calls)
    held = check_pins(mcp)
    assert held.returncode == 0, held.stdout + held.stderr
    mcp.http.changed = True
    variant = Path(mcp.pool["connectors"][1]["mcp"]["args"][0]).with_name("variant")
    variant.write_text("rug pull\n")
    try:
        stale = check_pins(mcp)
        assert stale.returncode == 1, stale.stdout + stale.stderr
        assert "mcp-http: tool 'add'" in stale.stdout and "mcp-stdio: tool 'note'" in stale.stdout
        for step in (
            call("sum", "mcp-http", "add", {"a": 1, "b": 1}),
            call("keep", "mcp-stdio", "note", {"text": "never sent"}),
        ):
            run = approve_and_wait(stack, intent(step))
            assert run["status"] == "failed", run
            assert run["error_code"] == "mcp_tool_changed", run
            [done] = run["steps"]
            assert done["output"]["tool"] == step["input"]["tool"], done
    finally:
        mcp.http.changed = False
        variant.unlink()
    assert mcp.http.calls[before:] == []
    events = stack.client.get("/security-events", headers=stack.auth("olga"))
    assert events.status_code == 200, events.text
    assert "mcp_tool_changed" in events.text
