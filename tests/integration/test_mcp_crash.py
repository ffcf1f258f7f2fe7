"""kill -9 in the middle of an MCP call, with real worker processes.

Worker A runs with ``GATEHOUSE_CRASH_POINT=after_effect:target``: the MCP server
has answered, the ledger has not recorded it, and the worker dies as under
``kill -9``. Worker B recovers the run. MCP has no idempotency keys, so a call
to a tool that is not read-only is in doubt: the run waits in ``needs_operator``
and the server saw the call once. A tool the connector declares read-only is
simply sent again. Either way the run then replays from its ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from policies import catalog
from shim.local import start_worker, stop
from tests.support.mcp import POOL_ID, McpHttpServer, http_connector, write_policies
from tests.support.plans import digest_of_plan
from tests.support.stack import (
    shim_client,
    wait_for_status,
)


def _read(client: TestClient, run_id: str) -> dict[str, Any]:
    r = client.get(f"/runs/{run_id}")
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _ledger(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/runs/{run_id}/ledger")
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["calls"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tool", "arguments"), [("note", {"text": "once"}), ("add", {"a": 1, "b": 2})]
)
def test_kill_9_during_an_mcp_call(
    db_url: str, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    read_only = tool == "add"
    with McpHttpServer() as server, pytest.MonkeyPatch.context() as patch:
        folder = write_policies(tmp_path / "policies", [http_connector(server.url)])
        env = {catalog.EXTRA_POLICIES_ENV: str(folder)}
        patch.setenv(catalog.EXTRA_POLICIES_ENV, str(folder))
        catalog.reload()
        try:
            with shim_client(db_url) as client:
                step = {
                    "step_id": "target",
                    "verb": "run",
                    "connector_id": "mcp-http",
                    "driver_kind": "mcp_proxy",
                    "input": {"tool": tool, "arguments": arguments},
                }
                plan = {"objective": "crash", "steps": [step]}
                body = {"recipe": "echo", "objective": "crash", "mode": "run-plan",
                        "policy_profile": POOL_ID, "tool_pool": POOL_ID, "plan": plan}  # fmt: skip
                r = client.post("/intent", json=body)
                assert r.status_code == 202, r.text
                run_id = r.json()["run_id"]
                ok = client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
                assert ok.status_code == 200, ok.text

                crashing = start_worker(
                    db_url,
                    "mcp-crash",
                    tmp_path / "ws",
                    tmp_path / "a.log",
                    {**env, "GATEHOUSE_CRASH_POINT": "after_effect:target"},
                )
                try:
                    assert crashing.wait(timeout=90) == 137, (tmp_path / "a.log").read_text()
                finally:
                    stop([crashing])
                assert len(server.calls) == 1
                assert _read(client, run_id)["status"] == "running"

                recovering = start_worker(
                    db_url, "mcp-crash", tmp_path / "ws", tmp_path / "b.log", env
                )
                try:
                    if not read_only:
                        waiting = wait_for_status(
                            lambda rid: _read(client, rid), run_id, {"needs_operator"}, 90
                        )
                        assert waiting["phase"] == "operator"
                        [doubt] = [c for c in _ledger(client, run_id) if c["status"] == "in_doubt"]
                        assert doubt["step_id"] == "target"
                        assert server.calls == ["once"]  # never sent again on its own
                        resolved = client.post(
                            f"/calls/{doubt['op_key']}/resolve",
                            json={"outcome": "applied", "note": "the server's log has it"},
                            headers=client.people.auth("olga"),
                        )
                        assert resolved.status_code == 200, resolved.text
                    done = wait_for_status(
                        lambda rid: _read(client, rid), run_id, {"succeeded", "failed"}, 90
                    )
                    assert done["status"] == "succeeded", done
                    replayed = client.post(
                        f"/runs/{run_id}/replay", headers=client.people.auth("olga")
                    )
                    assert replayed.status_code == 200, replayed.text
                    assert replayed.json()["match"] is True, replayed.json()
                finally:
                    stop([recovering])
                # read-only: sent again after the crash; otherwise exactly once
                assert server.calls == (["add 1 2", "add 1 2"] if read_only else ["once"])
                statuses = sorted(c["status"] for c in _ledger(client, run_id))
                assert statuses == (["completed"] if read_only else ["applied"])
        finally:
            patch.delenv(catalog.EXTRA_POLICIES_ENV)
            catalog.reload()
