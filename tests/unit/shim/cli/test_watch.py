"""``runs watch``: no row is left showing ``running`` once its end has passed (the
planner's ``@compile`` row stayed "running" on screen after the run succeeded)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from contracts import RunEvent, RunStatus, RunView
from shim.cli.watch import watch

RUN = "run_" + "c" * 32


class _Api:
    """The two reads ``watch`` makes, answered from a script of events."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]], final: RunStatus) -> None:
        self.events_ = events
        self.final = final
        self.reads = 0

    def run(self, run_id: str) -> RunView:
        self.reads += 1
        status = RunStatus.RUNNING if self.reads == 1 else self.final
        return RunView.model_validate(
            {
                "run_id": run_id,
                "intent_id": "int_1",
                "recipe": "echo",
                "objective": "watch me",
                "mode": "full-cycle",
                "status": status,
                "phase": "compile",
                "submitted_by": "sam",
                "policy_profile": "default",
                "tool_pool": "default",
                "plan_digest": None,
                "error_code": None,
                "error_message": None,
                "created_at": "t",
                "updated_at": "t",
                "plan_card": None,
                "approvals": [],
                "steps": [],
                "links": {},
            }
        )

    def events(self, run_id: str) -> Iterator[RunEvent]:
        for seq, (kind, body) in enumerate(self.events_, 1):
            yield RunEvent.model_validate(
                {"run_id": run_id, "seq": seq, "kind": kind, "at": "t", "body": body}
            )


def _watched(events: list[tuple[str, dict[str, Any]]], final: RunStatus) -> str:
    out = io.StringIO()
    api = _Api(events, final)
    watch(api, RUN, Console(file=out, width=200, force_terminal=False))  # type: ignore[arg-type]  # a stand-in for the two reads
    return out.getvalue()


def test_the_planners_row_ends_when_the_run_moves_on() -> None:
    text = _watched(
        [
            ("step.started", {"step_id": "@compile", "attempt": 1}),
            ("run.phase", {"status": "waiting_approval", "phase": "approval"}),
            ("run.phase", {"status": "succeeded", "phase": "done"}),
        ],
        RunStatus.SUCCEEDED,
    )
    compile_rows = [line for line in text.splitlines() if line.lstrip().startswith("@compile")]
    assert compile_rows and all("running" not in line for line in compile_rows), text
    assert any("done" in line for line in compile_rows), text


def test_a_step_cut_short_by_the_runs_end_says_so() -> None:
    text = _watched(
        [
            ("step.started", {"step_id": "s1", "attempt": 1}),
            ("run.phase", {"status": "cancelled", "phase": "done"}),
        ],
        RunStatus.CANCELLED,
    )
    rows = [line for line in text.splitlines() if line.lstrip().startswith("s1")]
    assert rows and "not finished (run cancelled)" in rows[-1], text
