"""Decisions on a run's plans: first decision per (run, plan digest) wins."""

from __future__ import annotations

from pydantic import ValidationError

from contracts import ApprovalView, Decision, ErrorCode, GatehouseError, JsonValue, digest_of
from ledger import chain, events
from ledger._db import Conn, corrupt, now_iso, sql
from ledger._statement import execute

__all__ = [
    "Decided",
    "approval_id",
    "approvals_of",
    "decision_for",
    "endorse",
    "endorsements_of",
    "endorsers",
    "insert_decision",
]


def approvals_of(conn: Conn, run_id: str) -> list[ApprovalView]:
    rows = execute(
        conn,
        sql(
            "SELECT plan_digest, decision, decided_by, comment, decided_at"
            " FROM plan_approvals WHERE run_id = :r ORDER BY decided_at, approval_id"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            ApprovalView(
                plan_digest=r[0],
                decision=Decision(r[1]),
                decided_by=r[2],
                comment=r[3],
                decided_at=r[4],
            )
            for r in rows
        ]
    except (ValidationError, ValueError) as exc:
        raise corrupt("plan_approvals", run_id, exc) from exc


class Decided:
    """A decision on record for one (run, plan digest)."""

    def __init__(self, decision: Decision, decided_by: str, inserted: bool) -> None:
        self.decision = decision
        self.decided_by = decided_by
        self.inserted = inserted


def approval_id(run_id: str, plan_digest: str) -> str:
    """The id of the one decision a run can have on one plan digest: made from the
    pair the table holds unique, so it names that event and no other. (It was once
    made from the digest alone, which two runs of one plan share: the second run's
    automatic approval met the first's row and its workflow died.)"""
    return "apr_" + digest_of([run_id, plan_digest])[:32]


def insert_decision(
    conn: Conn,
    *,
    run_id: str,
    plan_digest: str,
    decision: Decision,
    decided_by: str,
    comment: str | None,
    token_id: str | None = None,
) -> Decided:
    """First decision per (run, digest) wins; the one on record is returned. The
    row's id is ``approval_id(run_id, plan_digest)``.

    ``token_id``, the public id of the token the decision came with, goes into the
    run's ``approval`` event (the row keeps the identity only)."""
    row: dict[str, JsonValue] = {
        "approval_id": approval_id(run_id, plan_digest),
        "run_id": run_id,
        "plan_digest": plan_digest,
        "decision": decision.value,
        "decided_by": decided_by,
        "comment": comment,
        "decided_at": now_iso(),
    }
    sealed_json, sealed_hash = chain.seal_decision(row)
    inserted = execute(
        conn,
        sql(
            "INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision, decided_by,"
            " comment, decided_at, sealed_json, sealed_hash) VALUES (:approval_id, :run_id,"
            " :plan_digest, :decision, :decided_by, :comment, :decided_at, :sj, :sh)"
            " ON CONFLICT (run_id, plan_digest) DO NOTHING RETURNING approval_id"
        ),
        {**row, "sj": sealed_json, "sh": sealed_hash},
    ).first()
    if inserted is not None:
        body: dict[str, JsonValue] = {
            "decision": decision.value,
            "decided_by": decided_by,
            "plan_digest": plan_digest,
        }
        if token_id is not None:
            body["token_id"] = token_id
        events.emit(conn, run_id, "approval", body)
        return Decided(decision, decided_by, True)  # the row on record is this one
    on_record = decision_for(conn, run_id, plan_digest)
    if on_record is None:  # pragma: no cover - the row was just written or already there
        raise GatehouseError(ErrorCode.INTERNAL_ERROR, "decision vanished after insert")
    return Decided(on_record.decision, on_record.decided_by, False)


def decision_for(conn: Conn, run_id: str, plan_digest: str) -> Decided | None:
    row = execute(
        conn,
        sql(
            "SELECT decision, decided_by FROM plan_approvals WHERE run_id = :r AND plan_digest = :d"
        ),
        {"r": run_id, "d": plan_digest},
    ).first()
    if row is None:
        return None
    try:
        return Decided(Decision(row[0]), row[1], inserted=False)
    except ValueError as exc:
        raise corrupt("plan_approvals", run_id, exc) from exc


def endorse(
    conn: Conn,
    run_id: str,
    plan_digest: str,
    endorsed_by: str,
    *,
    comment: str | None,
    token_id: str | None = None,
) -> bool:
    """Record one person's approval of a plan that needs several (the caller holds
    the run's row lock); False when they had approved it already."""
    inserted = execute(
        conn,
        sql(
            "INSERT INTO plan_endorsements (run_id, plan_digest, endorsed_by, comment,"
            " endorsed_at) VALUES (:r, :d, :b, :c, :t)"
            " ON CONFLICT (run_id, plan_digest, endorsed_by) DO NOTHING RETURNING run_id"
        ),
        {"r": run_id, "d": plan_digest, "b": endorsed_by, "c": comment, "t": now_iso()},
    ).first()
    if inserted is not None:
        body: dict[str, JsonValue] = {
            "decision": "endorsed",
            "decided_by": endorsed_by,
            "plan_digest": plan_digest,
        }
        if token_id is not None:
            body["token_id"] = token_id
        events.emit(conn, run_id, "approval", body)
    return inserted is not None


def endorsers(conn: Conn, run_id: str, plan_digest: str) -> list[str]:
    """Who approved the plan so far, in the order they did."""
    rows = execute(
        conn,
        sql(
            "SELECT endorsed_by FROM plan_endorsements WHERE run_id = :r AND plan_digest = :d"
            " ORDER BY endorsed_at, endorsed_by"
        ),
        {"r": run_id, "d": plan_digest},
    ).all()
    return [str(r[0]) for r in rows]


def endorsements_of(conn: Conn, run_id: str) -> list[ApprovalView]:
    """Every approval on the way to a quorum, of any of the run's plans."""
    rows = execute(
        conn,
        sql(
            "SELECT plan_digest, endorsed_by, comment, endorsed_at FROM plan_endorsements"
            " WHERE run_id = :r ORDER BY endorsed_at, endorsed_by"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            ApprovalView(plan_digest=r[0], decision=Decision.APPROVED, decided_by=r[1],
                         comment=r[2], decided_at=r[3])
            for r in rows
        ]  # fmt: skip
    except ValidationError as exc:
        raise corrupt("plan_endorsements", run_id, exc) from exc
