"""opencode steps inside real runs, on SQLite and on PostgreSQL: a real OpenCode
(the pinned build, supervised by the in-process worker) driven by the scripted
model. The run edits a file through the ledger, leaves an episode per thing
OpenCode did, and replays from its ledger (at teardown, with the network guard)
without OpenCode or the model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.opencode import approved_plan_run, opencode_stack_for
from tests.support.stack import BACKENDS, Stack

NOTE = b"written by opencode\n"
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "WRITE-NOTE",
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "write",
                            "arguments": {"filePath": "note.txt", "content": NOTE.decode()},
                        }
                    ]
                },
                {"content": "wrote note.txt"},
            ],
        }
    ]
}
PLAN: dict[str, Any] = {
    "objective": "write a note",
    "steps": [
        {
            "step_id": "write",
            "verb": "edit",
            "connector_id": "workspace-opencode",
            "driver_kind": "opencode",
            "input": {"prompt": "WRITE-NOTE: write note.txt"},
        },
        {
            "step_id": "check",
            "verb": "run",
            "connector_id": "workspace-shell",
            "driver_kind": "restricted_shell",
            "input": {"argv": ["sha256sum", "note.txt"]},
        },
    ],
}


@pytest.fixture(scope="module", params=BACKENDS)
def oc_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from opencode_stack_for(request, tmp_path_factory, SCRIPT)


def test_an_opencode_step_edits_through_the_ledger(oc_stack: Stack) -> None:
    stack = oc_stack
    run_id = approved_plan_run(stack, PLAN, "opencode")  # stall_s 30: a loaded machine is no stall
    done = stack.wait(run_id, {"succeeded", "failed"}, timeout=120)
    assert done["status"] == "succeeded", done
    assert (stack.workspace_root / run_id / "note.txt").read_bytes() == NOTE
    write, check = done["steps"]
    digest_hex = hashlib.sha256(NOTE).hexdigest()
    assert write["output"]["files"] == [{"path": "note.txt", "before": None, "after": digest_hex}]
    assert digest_hex in check["output"]["stdout"]  # the next step sees the real file
    usage = write["output"]["usage"]  # what the budgets count: OpenCode's reported tokens
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] >= 0, usage
    calls = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    assert [(c["step_id"], c["target"], c["status"]) for c in calls] == [
        ("write", "opencode", "completed"),
        ("check", "restricted_shell", "completed"),
    ], [(c["attempt"], c["error_code"], c["sends"], c["resends"]) for c in calls]
    used = done["budgets"]["used"]
    assert used["model_turns"] == 1 and used["steps"] == 2, (used, write)
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    kinds = [e["episode_type"] for e in episodes]
    assert kinds.count("execution/opencode_permission") == 1
    assert kinds.count("execution/opencode_file") == 1
    assert "execution/opencode_tool" in kinds
    artifacts = stack.client.get(f"/runs/{run_id}/artifacts").json()["artifacts"]
    assert any(a["name"].startswith("opencode-events-") for a in artifacts)
