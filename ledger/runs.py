"""Runs: their rows, status, finished steps, and the run view read back whole.

Plan cards live in ``ledger.plan_cards``, decisions in ``ledger.approvals``,
lineage and forks in ``ledger.forks``.

Every row read back is parsed into its contract model: a row that does not
parse raises ``corrupt_record`` instead of reaching a caller half-valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import accumulate, pairwise

import sqlalchemy as sa
from pydantic import ValidationError

from contracts import (
    BudgetsView,
    Decision,
    EditedFrom,
    Episode,
    JsonObject,
    PlanAuthor,
    PlanCardView,
    RunStatus,
    RunSummary,
    RunView,
    StepView,
    canonical_json,
)
from ledger import approvals, edits, events, evidence, opa_runs, plan_cards
from ledger._db import Conn, corrupt, is_postgres, now_iso, sql
from ledger._row_locks import run_held
from ledger._statement import execute, rows_changed

__all__ = [
    "STATUS_CHANNEL",
    "Awaiting",
    "awaiting_decision",
    "get_run",
    "list_runs",
    "queued",
    "record_decision",
    "record_step",
    "run_status",
    "set_budgets",
    "set_seed",
    "set_status",
    "set_trace_digest",
    "status_of",
]

_RUN_COLUMNS = (
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


def _steps(conn: Conn, run_id: str) -> list[StepView]:
    rows = execute(
        conn,
        sql(
            "SELECT step_id, position, driver_kind, connector_id, status, op_key, output_json,"
            " error_code, error_message, finished_at FROM run_steps WHERE run_id = :r"
            " ORDER BY position"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            StepView(
                step_id=r[0],
                position=r[1],
                driver_kind=r[2],
                connector_id=r[3],
                status=r[4],
                op_key=r[5],
                output=None if r[6] is None else json.loads(r[6]),
                error_code=r[7],
                error_message=r[8],
                finished_at=r[9],
            )
            for r in rows
        ]
    except (ValidationError, ValueError) as exc:
        raise corrupt("run_steps", run_id, exc) from exc


def _authors(conn: Conn, run_id: str, submitter: str, *, derived: bool) -> list[PlanAuthor]:
    """Who wrote the run's plan: a run neither edited nor forked from another has one
    author, its submitter, and costs no walk of a chain (a run's view is read at every
    poll of it); a derived run's chain is walked (``edits.authors``)."""
    if derived:
        return list(edits.authors(conn, run_id).found)
    return [PlanAuthor(name=submitter, part="submitted", run_id=run_id)]


def _of(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


# How many columns each part of ``_GET_RUN`` has: the run's, then each joined record's
# key (None: the run has none) and its columns.
_PARTS = tuple(
    len(c.split(",")) + (0 if i == 0 else 1)
    for i, c in enumerate(
        (_RUN_COLUMNS, plan_cards.CARD_COLUMNS, opa_runs.COLUMNS, edits.EDIT_COLUMNS)
    )
)
# A run's row with the records it has at most one of (its plan card, OPA record and
# the edit it was started by), in one read: a run's view is read at every poll of it.
_GET_RUN = (
    f"SELECT {_of('r', _RUN_COLUMNS)}, c.run_id, {_of('c', plan_cards.CARD_COLUMNS)},"  # noqa: S608  (fixed columns)
    f" o.run_id, {_of('o', opa_runs.COLUMNS)}, e.run_id, {_of('e', edits.EDIT_COLUMNS)}"
    " FROM runs r LEFT JOIN plan_cards c ON c.run_id = r.run_id"
    " LEFT JOIN opa_runs o ON o.run_id = r.run_id LEFT JOIN plan_edits e ON e.run_id = r.run_id"
    " WHERE r.run_id = :r"
)


def get_run(conn: Conn, run_id: str, links: dict[str, str]) -> RunView | None:
    found = execute(conn, sql(_GET_RUN), {"r": run_id}).first()
    if found is None:
        return None
    row, has_card, has_opa, has_edit = (
        tuple(found[start:end]) for start, end in pairwise([0, *accumulate(_PARTS)])
    )
    card = None if has_card[0] is None else plan_cards.card_of(has_card[1:], run_id)
    opa = None if has_opa[0] is None else opa_runs.view_of(has_opa[1:], run_id)
    edit = None if has_edit[0] is None else edits.edit_from(has_edit[1:])
    try:
        return RunView(
            run_id=row[0],
            intent_id=row[1],
            recipe=row[2],
            objective=row[3],
            mode=row[4],
            status=row[5],
            phase=row[6],
            submitted_by=row[7],
            policy_profile=row[8],
            tool_pool=row[9],
            plan_digest=row[10],
            error_code=row[11],
            error_message=row[12],
            created_at=row[13],
            updated_at=row[14],
            profile_digest=row[15],
            tool_pool_digest=row[16],
            trace_digest=row[17],
            random_seed=row[18],
            parent_run_id=row[19],
            fork_from_step=row[20],
            budgets=None if row[21] is None else BudgetsView.model_validate_json(row[21]),
            cedar_digest=row[22],
            opa=opa,
            plan_card=None if card is None else card.model_copy(update={"source": opa}),
            approvals=approvals.approvals_of(conn, run_id),
            steps=_steps(conn, run_id),
            links=links,
            edited_from=None if edit is None else EditedFrom(
                run_id=edit.parent_run_id, plan_digest=edit.previous_digest,
                edited_by=edit.edited_by,
            ),
            plan_authors=_authors(
                conn, run_id, str(row[7]), derived=edit is not None or row[19] is not None
            ),
        )  # fmt: skip
    except (ValidationError, ValueError) as exc:
        raise corrupt("runs", run_id, exc) from exc


def list_runs(
    conn: Conn,
    status: RunStatus | None,
    limit: int,
    before: str | None,
    *,
    submitted_by: str | None = None,
    recipe: str | None = None,
) -> list[RunSummary]:
    """Newest first; ``before`` is the created_at|run_id cursor of the last page;
    ``submitted_by``: only the runs this identity submitted; ``recipe``: of it only."""
    clauses: list[str] = []
    params: dict[str, str | int] = {"lim": limit}
    if status is not None:
        clauses.append("status = :st")
        params["st"] = status.value
    if submitted_by is not None:
        clauses.append("submitted_by = :by")
        params["by"] = submitted_by
    if recipe is not None:
        clauses.append("recipe = :rec")
        params["rec"] = recipe
    if before is not None:
        created, _, rid = before.partition("|")
        clauses.append("(created_at < :c OR (created_at = :c AND run_id < :rid))")
        params.update({"c": created, "rid": rid})
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    # The WHERE clauses are fixed strings; every value is a bound parameter.
    query = (
        "SELECT run_id, recipe, mode, status, phase, created_at, updated_at, objective,"  # noqa: S608
        " submitted_by, error_code FROM runs"
        f" {where} ORDER BY created_at DESC, run_id DESC LIMIT :lim"
    )
    rows = execute(
        conn,
        sql(query),
        params,
    ).all()
    try:
        return [
            RunSummary(
                run_id=r[0],
                recipe=r[1],
                mode=r[2],
                status=r[3],
                phase=r[4],
                created_at=r[5],
                updated_at=r[6],
                objective=r[7],
                submitted_by=r[8],
                error_code=r[9],
            )
            for r in rows
        ]
    except ValidationError as exc:
        raise corrupt("runs", "list", exc) from exc


def queued(conn: Conn) -> tuple[int, str | None]:
    """How many runs wait in the queue, and when the oldest of them was submitted."""
    row = execute(
        conn, sql("SELECT COUNT(*), MIN(created_at) FROM runs WHERE status = 'queued'")
    ).one()
    return int(row[0]), None if row[1] is None else str(row[1])


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


@dataclass(frozen=True)
class Awaiting:
    """A run waiting for a decision on its plan, with what the approvals queue shows."""

    run: RunSummary
    policy_profile: str
    tool_pool: str
    tool_pool_digest: str | None  # the version the run was held to
    # When the wait ends and denies the plan; None: not known here (a run from before
    # runs were split waits in place, and its workflow holds the deadline).
    expires_at: str | None
    card: PlanCardView | None
    authors: tuple[PlanAuthor, ...]  # who wrote part of the plan (none of them decides)
    endorsed_by: tuple[str, ...]  # who approved the current plan so far, toward a quorum


def awaiting_decision(conn: Conn, limit: int) -> list[Awaiting]:
    """The runs waiting for approval, the longest waiting first, at most ``limit``: in
    two reads whatever their number (the runs with their cards, the approvals toward
    their quorums), and a walk of the chain of edits and forks for each run that has one."""
    rows = execute(
        conn,
        sql(
            "SELECT r.run_id, r.recipe, r.mode, r.status, r.phase, r.created_at, r.updated_at,"  # noqa: S608  (fixed columns)
            " r.objective, r.submitted_by, r.error_code, r.policy_profile, r.tool_pool,"
            " r.parked_until, r.parent_run_id IS NOT NULL OR EXISTS (SELECT 1 FROM plan_edits e"
            " WHERE e.run_id = r.run_id), c.run_id IS NOT NULL,"
            f" {', '.join(f'c.{col.strip()}' for col in plan_cards.CARD_COLUMNS.split(','))}"
            ", r.tool_pool_digest FROM runs r LEFT JOIN plan_cards c ON c.run_id = r.run_id"
            " WHERE r.status = :st ORDER BY r.updated_at, r.run_id LIMIT :lim"
        ),
        {"st": RunStatus.WAITING_APPROVAL.value, "lim": limit},
    ).all()
    endorsed: dict[tuple[str, str], list[str]] = {}
    if rows:
        found = execute(
            conn,
            sql(
                "SELECT run_id, plan_digest, endorsed_by FROM plan_endorsements"
                " WHERE run_id IN :r ORDER BY endorsed_at, endorsed_by"
            ).bindparams(sa.bindparam("r", expanding=True)),
            {"r": [str(r[0]) for r in rows]},
        ).all()
        for run_id, digest, by in found:
            endorsed.setdefault((str(run_id), str(digest)), []).append(str(by))
    out: list[Awaiting] = []
    for r in rows:
        run_id = str(r[0])
        try:
            summary = RunSummary(
                run_id=run_id, recipe=r[1], mode=r[2], status=r[3], phase=r[4],
                created_at=r[5], updated_at=r[6], objective=r[7], submitted_by=r[8],
                error_code=r[9],
            )  # fmt: skip
        except ValidationError as exc:
            raise corrupt("runs", run_id, exc) from exc
        card = plan_cards.card_of(r[15:22], run_id) if r[14] else None
        by = () if card is None else tuple(endorsed.get((run_id, card.plan_digest), ()))
        until = None if r[12] is None else str(r[12])
        authors = _authors(conn, run_id, str(r[8]), derived=bool(r[13]))
        pool_digest = None if r[22] is None else str(r[22])
        out.append(
            Awaiting(summary, str(r[10]), str(r[11]), pool_digest, until, card, tuple(authors), by)
        )
    return out
