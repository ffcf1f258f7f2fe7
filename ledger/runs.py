"""Runs: their rows, status and finished steps, as written (read back whole:
``ledger.run_views``).

Plan cards live in ``ledger.plan_cards``, decisions in ``ledger.approvals``,
lineage and forks in ``ledger.forks``.

Every row read back is parsed into its contract model: a row that does not
parse raises ``corrupt_record`` instead of reaching a caller half-valid.
"""

from __future__ import annotations

from contracts import (
    Decision,
    Episode,
    JsonObject,
    RunStatus,
    canonical_json,
)
from ledger import events, evidence, plan_cards
from ledger._db import Conn, corrupt, is_postgres, now_iso, sql
from ledger._row_locks import run_held
from ledger._statement import execute, rows_changed

__all__ = [
    "RUN_COLUMNS",
    "STATUS_CHANNEL",
    "record_decision",
    "record_step",
    "run_status",
    "set_budgets",
    "set_seed",
    "set_status",
    "set_trace_digest",
    "status_of",
]

RUN_COLUMNS = (
    "run_id, intent_id, recipe, objective, mode, status, phase, submitted_by,"
    " policy_profile, tool_pool, plan_digest, error_code, error_message, created_at, updated_at,"
    " profile_digest, tool_pool_digest, trace_digest, random_seed, parent_run_id, fork_from_step,"
    " budgets_json, cedar_digest"
)


# A finished run's status never changes again (a late or repeated write keeps it): the
# terminal statuses as SQL literals in the status change's text (the enum's own fixed
# values; a plain statement, which the ledger's runner sends as is).
_DONE = ", ".join(f"'{s.value}'" for s in RunStatus if s.terminal)

# PostgreSQL: every change of a run's status is announced on this channel
# (payload: the run id), so the shim can answer clients waiting on a run.
STATUS_CHANNEL = "gatehouse_run_status"
# Phase changes someone may need to hear about: a person must act, or the run ended.
NOTIFY_STATUSES = frozenset(
    {RunStatus.WAITING_APPROVAL, RunStatus.NEEDS_OPERATOR, RunStatus.FAILED,
     RunStatus.SUCCEEDED, RunStatus.REJECTED, RunStatus.CANCELLED, RunStatus.PLANNED}
)  # fmt: skip


def record_decision(conn: Conn, run_id: str, decision: Decision, recorded: Episode) -> None:
    """What a decision on the run's current plan changes, in the caller's transaction:
    the plan card approved or rejected, an approved run running, and the decision's
    episode (``policies.episodes.decision_episode``). Written by the worker when the
    run reads the decision, or by the shim when it takes one for a parked run."""
    plan_cards.set_plan_card_status(conn, run_id, decision.value)
    if decision is Decision.APPROVED:
        set_status(conn, run_id, RunStatus.RUNNING, "execute")
    evidence.put_episode(conn, run_id, None, recorded)


def run_status(conn: Conn, run_id: str) -> RunStatus | None:
    row = execute(conn, sql("SELECT status FROM runs WHERE run_id = :r"), {"r": run_id}).first()
    return None if row is None else status_of(run_id, str(row[0]))


def status_and_submitter(conn: Conn, run_id: str) -> tuple[RunStatus, str] | None:
    """A run's status and who submitted it (one row): what a reader may be told of
    it before its whole view is read; None when there is no such run."""
    row = execute(
        conn, sql("SELECT status, submitted_by FROM runs WHERE run_id = :r"), {"r": run_id}
    ).first()
    return None if row is None else (status_of(run_id, str(row[0])), str(row[1]))


def status_of(run_id: str, value: str) -> RunStatus:
    """A runs row's status as read back (``corrupt_record`` when it is none)."""
    try:
        return RunStatus(value)
    except ValueError as exc:
        raise corrupt("runs", run_id, exc) from exc


_SET = (
    "status = :s, phase = :p, updated_at = :t,"
    " error_code = COALESCE(:ec, error_code), error_message = COALESCE(:em, error_message),"
    " plan_digest = COALESCE(:pd, plan_digest),"
    " finished_at = CASE WHEN :term THEN :t ELSE finished_at END"
)
_SET_STATUS = sql(
    f"UPDATE runs SET {_SET} WHERE run_id = :r AND status NOT IN ({_DONE})"  # noqa: S608
)
_WAS = sql("SELECT status, phase FROM runs WHERE run_id = :r")
# PostgreSQL, in one round trip: the update, the status and phase it replaced (read under
# the row lock the subquery takes, so the newest committed, as the update itself sees
# them), and the word to the shim's waiting clients (delivered when the transaction
# commits, whether or not a row changed).
_SET_STATUS_TOLD = sql(
    f"WITH u AS (UPDATE runs r SET {_SET}"  # noqa: S608
    " FROM (SELECT run_id, status, phase FROM runs WHERE run_id = :r FOR UPDATE) o"
    f" WHERE r.run_id = o.run_id AND o.status NOT IN ({_DONE}) RETURNING o.status, o.phase)"
    " SELECT (SELECT COUNT(*) FROM u), (SELECT status FROM u), (SELECT phase FROM u),"
    " pg_notify(:c, :r)"
)


def set_status(
    conn: Conn,
    run_id: str,
    status: RunStatus,
    phase: str,
    *,
    error_code: str | None = None,
    error_message: str | None = None,
    plan_digest: str | None = None,
) -> None:
    values = {
        "s": status.value,
        "p": phase,
        "t": now_iso(),
        "ec": error_code,
        "em": error_message,
        "pd": plan_digest,
        "term": status.terminal,
        "r": run_id,
    }
    was: tuple[str, str] | None  # the status and phase it replaced
    if is_postgres(conn):  # the notice wakes the shim's waiting clients when this commits
        row = execute(conn, _SET_STATUS_TOLD, {**values, "c": STATUS_CHANNEL}).one()
        changed = int(row[0])
        was = (str(row[1]), str(row[2])) if changed else None
    else:
        found = execute(conn, _WAS, {"r": run_id}).first()
        was = None if found is None else (str(found[0]), str(found[1]))
        changed = rows_changed(execute(conn, _SET_STATUS, values))
    if changed:
        run_held(conn, run_id)  # the UPDATE holds the row: the event below needs no lock
    # Only a real change is a phase event: a records step run again (after a crash before
    # its checkpoint) says nothing new. The row's status and phase are only ever set
    # here, each change with its event, so the row says what the stream last said.
    if changed and was != (status.value, phase):
        events.emit(
            conn, run_id, "run.phase",
            {"status": status.value, "phase": phase, "error_code": error_code},
            notify=status in NOTIFY_STATUSES,
        )  # fmt: skip


_SEED = "UPDATE runs SET random_seed = COALESCE(random_seed, :s)"
_RETURNING_SEED = " WHERE run_id = :r RETURNING random_seed"


def set_seed(
    conn: Conn, run_id: str, seed: str, held_to: tuple[str, str, str | None] | None = None
) -> str:
    """The run's seed: ``seed`` if it had none yet, else the one it already has
    (chosen once, whoever asks again). ``held_to``: the digests of the profile, tool
    pool and Cedar policy set files (None: its profile names no policy set) the run is
    held to, recorded in the same statement."""
    if held_to is None:
        found = execute(conn, sql(_SEED + _RETURNING_SEED), {"s": seed, "r": run_id})
    else:
        profile, pool, cedar = held_to
        found = execute(
            conn,
            sql(
                f"{_SEED}, profile_digest = :p, tool_pool_digest = :t, cedar_digest = :c"
                + _RETURNING_SEED
            ),
            {"s": seed, "r": run_id, "p": profile, "t": pool, "c": cedar},
        )
    stored = found.scalar()
    if stored is None:
        return seed  # no such run
    run_held(conn, run_id)  # the UPDATE locked the run's row
    return str(stored)


def set_budgets(conn: Conn, run_id: str, budgets: JsonObject) -> None:
    """The run's budgets, used / limit (a display copy; the ledger is the truth)."""
    events.later(
        conn,
        "UPDATE runs SET budgets_json = :b WHERE run_id = :r",
        {"b": canonical_json(budgets), "r": run_id},
    )


def set_trace_digest(conn: Conn, run_id: str, trace_digest: str) -> None:
    execute(
        conn,
        sql("UPDATE runs SET trace_digest = :d WHERE run_id = :r"),
        {"d": trace_digest, "r": run_id},
    )


def record_step(
    conn: Conn,
    *,
    run_id: str,
    step_id: str,
    position: int,
    driver_kind: str,
    connector_id: str,
    status: str,
    op_key: str | None,
    output: JsonObject | None,
    error_code: str | None,
    error_message: str | None,
) -> None:
    events.later(
        conn,
        "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id, status,"
        " op_key, output_json, error_code, error_message, finished_at)"
        " VALUES (:r, :s, :p, :dk, :c, :st, :op, :o, :ec, :em, :t)"
        " ON CONFLICT (run_id, step_id) DO NOTHING",
        {
            "r": run_id,
            "s": step_id,
            "p": position,
            "dk": driver_kind,
            "c": connector_id,
            "st": status,
            "op": op_key,
            "o": None if output is None else canonical_json(output),
            "ec": error_code,
            "em": error_message,
            "t": now_iso(),
        },
        events.Emits(
            run_id, "step.finished",
            {"step_id": step_id, "position": position, "status": status,
             "error_code": error_code, "op_key": op_key},
        ),
    )  # fmt: skip
