"""How a run ends: terminal status, trace digest and summary episode, one commit."""

from __future__ import annotations

from contracts import (
    ErrorCode,
    JsonObject,
    JsonValue,
    RunStatus,
)
from ledger import Conn, anchors, cancels, evidence, now_iso, runs
from policies.episodes import budget_episode, run_summary_episode
from worker.records._cancels import observe_cancel
from worker.runtime import WorkerSettings

__all__ = ["FINISH", "close_run", "finish"]


# The boundary a cancel is seen at when it came after the run's last step.
FINISH = "@finish"


def finish(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """How the run ended (``{status}``): a succeeded run that a cancel reached after its
    last step ends cancelled (``close_run``, ``cancel_wins``)."""
    run_id = str(arg["run_id"])
    code = arg.get("error_code")
    message = arg.get("error_message")
    trace = arg.get("trace_digest")
    budgets = arg.get("budgets")
    if isinstance(budgets, dict):
        runs.set_budgets(s, run_id, budgets)
        if code == ErrorCode.BUDGET_EXCEEDED.value:
            evidence.put_episode(
                s,
                run_id,
                None,
                budget_episode(
                    run_id=run_id,
                    budgets=budgets,
                    message=str(message or ""),
                    executor_id=me.executor_id,
                    recorded_at=now_iso(),
                ),
            )
    status = close_run(
        s,
        run_id,
        RunStatus(str(arg["status"])),
        me,
        code=code if isinstance(code, str) else None,
        message=message if isinstance(message, str) else None,
        trace=trace if isinstance(trace, str) else None,
        steps=arg["steps"] if isinstance(arg["steps"], list) else [],
        cancel_wins=True,
    )
    return {"status": status.value}


def close_run(
    s: Conn,
    run_id: str,
    status: RunStatus,
    me: WorkerSettings,
    *,
    code: str | None,
    message: str | None,
    trace: str | None,
    steps: list[JsonValue],
    summary: str | None = None,
    cancel_wins: bool = False,
) -> RunStatus:
    """The end of every run, whoever ends it (its flow's ``finish``, or the reaper for a
    run its workflow could not end): its trace digest, its terminal status, its summary
    episode and its chain's head anchored (``ledger/anchors.py``), in the caller's
    transaction; the status it ended with.

    ``cancel_wins``: a cancel accepted after the last step's boundary still wins over
    ``succeeded``, seen here, in the commit that would have made the run succeeded. It
    is read after the run's row lock (the trace digest's ``UPDATE``, written first, or
    a lock of its own), which a cancel holds until it commits: read before it, a cancel
    committing meanwhile was missed, and the run ended succeeded though the cancel had
    been answered "cancelling"."""
    if trace is not None:
        runs.set_trace_digest(s, run_id, trace)
    if cancel_wins and status is RunStatus.SUCCEEDED:
        if trace is None:
            cancels.lock_run(s, run_id)
        found = observe_cancel(s, run_id, FINISH, me.executor_id)
        if found is not None:
            status, code = RunStatus.CANCELLED, ErrorCode.RUN_CANCELLED.value
            reason = found.get("reason")
            message = f"cancelled by {found.get('cancelled_by')} at {FINISH}" + (
                f": {reason}" if reason else ""
            )
    runs.set_status(s, run_id, status, "done", error_code=code, error_message=message)
    evidence.put_episode(
        s,
        run_id,
        None,
        run_summary_episode(
            run_id=run_id,
            status=status,
            steps=steps,
            error_code=code,
            trace_digest=trace,
            executor_id=me.executor_id,
            recorded_at=now_iso(),
            summary=summary,
        ),
    )
    anchors.anchor_run(s, run_id, me.executor_id, me.signing_key, me.anchor_file)
    return status
