"""A tool call's path from the flow to the claim's INSERT, as the running worker takes
it: no more than six of Gatehouse's own frames (issue 47), from the flow's ``settle``
to ``ledger.calls.claim``, on SQLite and PostgreSQL. It was fourteen while retries and
the ledger's transaction were callbacks around the call (``steady``, ``_ledger_tx``)."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from sqlalchemy import event

from tests.support.stack import Stack
from worker.runtime import runtime

ROOT = Path(__file__).resolve().parents[2]
OURS = {"contracts", "ledger", "policies", "shim", "worker", "opa_format"}
MOST_FRAMES = 6
STATEMENT = "ledger/_statement.py:execute"


def _ours(frame: traceback.FrameSummary) -> str | None:
    """``package/module.py:function`` for a frame of Gatehouse's own code, else None."""
    try:
        where = Path(frame.filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return f"{where}:{frame.name}" if where.parts[0] in OURS else None


def test_a_tool_call_reaches_its_insert_in_six_frames(stack: Stack) -> None:
    paths: list[tuple[Any, list[str]]] = []

    def seen(_conn: object, _cursor: object, statement: str, params: Any, *_: object) -> None:
        # the claim's INSERT (on PostgreSQL inside one statement with its event)
        if "INSERT INTO calls (op_key" in statement:
            frames = [o for o in map(_ours, traceback.extract_stack()) if o is not None]
            paths.append((params, frames))

    engine = runtime().db.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        run_id = stack.finished_run(steps=1, objective="the call path")
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    mine = [frames for params, frames in paths if run_id in str(params)]
    assert len(mine) == 1, mine  # the step's claim (a run-plan run makes no compile call)
    tool = mine[0]
    starts = [n for n, frame in enumerate(tool) if frame == "worker/flow/_settle.py:settle"]
    assert starts, tool  # the step's call is made by the flow's settle
    path = tool[starts[-1] :]
    # the statement is run by the ledger's statement runner, as it was by SQLAlchemy's
    # Connection.execute: the database client's frame, not a step of the path
    assert path[-1] == STATEMENT, path
    path = path[:-1]
    assert path[-1] == "ledger/calls.py:claim", path
    shown = "\n  ".join(path)
    assert len(path) <= MOST_FRAMES, f"{len(path)} frames from the flow to the INSERT:\n  {shown}"
