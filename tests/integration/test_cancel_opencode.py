"""Cancelling a run while an OpenCode turn is in flight, on SQLite and on PostgreSQL.

A real OpenCode (the pinned build) driven by the scripted model: the turn
writes a file, then the model takes its time over the next reply. The cancel
lands meanwhile; the turn's watch sees it, aborts the session through the
OpenCode API, reverts the turn and restores the workspace snapshot, and the
run ends ``cancelled`` without its next step. The run replays at teardown.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.opencode import approved_plan_run, edit_then_note, opencode_stack_for, write_call
from tests.support.stack import BACKENDS, Stack, run_workflow_status

# The model's reply is this far away: a turn that waited for it could not end
# within the test's wait (no timing is asserted).
_REPLY_S = 300

SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "CANCEL-ME",
            "replies": [
                write_call("half.txt", "half done\n"),
                {"content": "all done", "delay_s": _REPLY_S},
            ],
        }
    ]
}
PLAN: dict[str, Any] = edit_then_note(
    "an edit cut off by a cancel", "CANCEL-ME: write half.txt, then think for a long time"
)


@pytest.fixture(scope="module", params=BACKENDS)
def oc_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from opencode_stack_for(request, tmp_path_factory, SCRIPT)


def test_cancel_mid_turn_aborts_reverts_and_restores(oc_stack: Stack) -> None:
    stack = oc_stack
    run_id = approved_plan_run(stack, PLAN, "opencode")

    written = stack.workspace_root / run_id / "half.txt"
    deadline = time.monotonic() + 90
    while not written.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert written.exists(), "the turn never wrote its file"

    c = stack.client.post(f"/runs/{run_id}/cancel", json={"reason": "changed my mind"})
    assert c.status_code == 200, c.text
    done = stack.wait(run_id, {"cancelled", "succeeded", "failed"}, timeout=_REPLY_S / 2)
    assert done["status"] == "cancelled", done

    # the half-done edit is undone: the workspace is as before the turn
    assert not written.exists()
    (edit,) = done["steps"]
    assert (edit["step_id"], edit["status"], edit["error_code"]) == (
        "edit",
        "failed",
        "run_cancelled",
    )
    assert edit["output"]["workspace_after"] == edit["output"]["workspace_before"]
    assert edit["output"]["diagnostics"]["reason"].startswith("the run was cancelled by alice")
    calls = stack.sql("SELECT step_id FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id)
    assert calls == [("edit",)]  # nothing for "after"
    stop = next(
        e
        for e in stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
        if e["episode_type"] == "execution/cancel"
    )
    assert stop["body"]["result_details"]["at"] == "edit#cut"

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if run_workflow_status(run_id) == "CANCELLED":
            break
        time.sleep(0.1)
    assert run_workflow_status(run_id) == "CANCELLED"
