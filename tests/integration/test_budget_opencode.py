"""An OpenCode turn that spends past the run's budgets is cut short, on SQLite and PostgreSQL.

A real OpenCode (the pinned build) driven by the scripted model: the turn's
first reply writes a file and reports more tokens than the run has left;
the next reply is far away. The watch sees the usage as it arrives, aborts
the session, reverts the turn and restores the workspace, and the run ends
``budget_exceeded`` without its next step. The run replays at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.opencode import approved_plan_run, edit_then_note, opencode_stack_for, write_call
from tests.support.stack import BACKENDS, Stack

# The model's next reply is this far away: a run that waited for it could not end
# within the test's wait. (No timing is asserted: the run ends before it, or the
# wait fails.)
_REPLY_S = 300

SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "SPEND-ME",
            "replies": [
                {
                    **write_call("spent.txt", "paid for\n"),
                    "usage": {"prompt_tokens": 4000, "completion_tokens": 1000},
                },
                {"content": "all done", "delay_s": _REPLY_S},
            ],
        }
    ]
}
PLAN: dict[str, Any] = edit_then_note(
    "an edit that costs more than the run has left",
    "SPEND-ME: write spent.txt, then think for a long time",
    on_error="continue",  # a budget is hard: the run ends all the same
)


@pytest.fixture(scope="module", params=BACKENDS)
def oc_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from opencode_stack_for(request, tmp_path_factory, SCRIPT)


def test_a_turn_past_the_token_budget_is_cut_short_and_undone(oc_stack: Stack) -> None:
    stack = oc_stack
    run_id = approved_plan_run(stack, PLAN, "opencode", budgets={"max_tokens": 3000})

    done = stack.wait(run_id, {"cancelled", "succeeded", "failed"}, timeout=_REPLY_S / 2)
    assert (done["status"], done["error_code"]) == ("failed", "budget_exceeded"), done
    assert done["error_message"] == "max_tokens: 5,000 used of 3,000"
    assert done["budgets"]["exceeded"] == "max_tokens"
    assert done["budgets"]["used"]["prompt_tokens"] == 4000

    (edit,) = done["steps"]  # "after" never ran, whatever the step's on_error
    assert (edit["step_id"], edit["status"], edit["error_code"]) == (
        "edit",
        "failed",
        "budget_exceeded",
    )
    assert edit["error_message"] == (
        "max_tokens: the turn used 5,000 tokens; the run had 3,000 left; the turn was cut short"
    )
    # the paid-for edit is undone: the workspace is as before the turn
    assert not (stack.workspace_root / run_id / "spent.txt").exists()
    assert edit["output"]["workspace_after"] == edit["output"]["workspace_before"]
    assert edit["output"]["usage"]["prompt_tokens"] == 4000
    # the envelope told the turn what was left
    (request,) = [
        row[0]
        for row in stack.sql(
            "SELECT request_json FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id
        )
    ]
    assert '"allowance"' in request and '"tokens":3000' in request.replace(" ", "")
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    assert "execution/budget_exceeded" in {e["episode_type"] for e in episodes}
