"""``gatehouse runs watch RUN_ID``: a run's event stream in the terminal.

One progress row per plan step (pending, running with a spinner and its
attempt, done or failed with its duration), a status line for the run, and a
line for each thing worth reading: phase changes, decisions, ledger writes,
episodes. It follows the stream until the run ends (a dropped connection
resumes from the last event seen); a run waiting for a person keeps it open,
so the watcher sees the decision when it comes. Model and tool text is never
shown here: events carry ids, statuses and codes only.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from contracts import JsonValue, RunEvent, RunStatus, RunView
from shim.cli.client import Client
from shim.cli.render import printable

__all__ = ["watch"]

# What the run ended as: good when it did what was asked.
_GOOD_ENDS = {RunStatus.SUCCEEDED.value, RunStatus.PLANNED.value}


def _s(value: JsonValue) -> str:
    return "" if value is None else str(value)


class _Board:
    def __init__(self, view: RunView, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(finished_text=" "),
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            TextColumn("{task.fields[state]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.rows: dict[str, TaskID] = {}
        self.running: set[str] = set()  # started, not yet finished
        self.status = view.status.value
        self.add_steps(view)

    def add_steps(self, view: RunView) -> None:
        card = view.plan_card
        for step in [] if card is None else card.plan.steps:
            self.row(step.step_id, f"{step.step_id} ({step.driver_kind.value})")

    def row(self, step_id: str, label: str | None = None) -> TaskID:
        if step_id not in self.rows:
            # rich builds these rows' text itself: made printable here, not by the console
            self.rows[step_id] = self.progress.add_task(
                printable(label or step_id), total=1, state="pending", start=False
            )
        return self.rows[step_id]

    def state(self, row: TaskID, state: str) -> None:
        self.progress.update(row, state=printable(state))

    def end_rows(self, state: str, *, only_calls: bool = False) -> None:
        """Rows still shown as running whose end no event will tell: the planner's call
        (``@compile``) once the run moved on, and every row once the run is over."""
        for step_id in sorted(self.running):
            if only_calls and not step_id.startswith("@"):
                continue
            row = self.rows[step_id]
            self.progress.update(row, completed=1)
            self.state(row, state)
            self.progress.stop_task(row)
            self.running.discard(step_id)

    def say(self, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False)

    def show(self, event: RunEvent, api: Client) -> None:
        b = event.body
        if event.kind == "run.phase":
            self.status = _s(b.get("status"))
            code = f" {_s(b.get('error_code'))}" if b.get("error_code") else ""
            self.say(f"#{event.seq} {event.at} run {self.status} ({_s(b.get('phase'))}){code}")
            self.end_rows("done", only_calls=True)
            if self.status == RunStatus.RUNNING.value and _s(b.get("phase")) == "execute":
                self.add_steps(api.run(event.run_id))  # the plan is known once gated
        elif event.kind == "step.started":
            row = self.row(_s(b.get("step_id")))
            self.progress.start_task(row)
            self.state(row, f"running (attempt {_s(b.get('attempt'))})")
            self.running.add(_s(b.get("step_id")))
        elif event.kind == "step.finished":
            row = self.row(_s(b.get("step_id")))
            code = f" {_s(b.get('error_code'))}" if b.get("error_code") else ""
            self.progress.update(row, completed=1)
            self.state(row, f"{_s(b.get('status'))}{code}")
            self.progress.stop_task(row)
            self.running.discard(_s(b.get("step_id")))
        elif event.kind == "ledger.written":
            ms = f" in {_s(b.get('duration_ms'))} ms" if b.get("duration_ms") is not None else ""
            self.say(f"#{event.seq} ledger {_s(b.get('step_id'))}: {_s(b.get('status'))}{ms}")
        elif event.kind == "approval":
            who = _s(b.get("decided_by"))
            self.say(f"#{event.seq} plan {_s(b.get('decision'))} by {who}")
        elif event.kind == "episode" and _s(b.get("episode_type")).startswith("security_event"):
            self.say(f"#{event.seq} security event {_s(b.get('episode_id'))}")


def watch(api: Client, run_id: str, console: Console) -> bool:
    """Render the run's stream until it ends; True if it succeeded (or planned)."""
    view = api.run(run_id)
    board = _Board(view, console)
    console.print(
        f"watching {run_id}: {view.recipe}, {view.status.value} ({view.phase})",
        markup=False,
        highlight=False,
    )
    with board.progress:
        for event in api.events(run_id):
            board.show(event, api)
        final = api.run(run_id)
        board.end_rows(f"not finished (run {final.status.value})")
    console.print(f"{run_id}: {final.status.value}", markup=False, highlight=False)
    return final.status.value in _GOOD_ENDS
