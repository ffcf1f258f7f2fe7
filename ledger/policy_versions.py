"""Every policy profile, tool pool, recipe and Cedar policy set version a worker ran
with, kept by the SHA-256 of its file's bytes (the digest a run records), so a replay
can hold a run to the rules of its time. Rows are only ever added; the same version
again adds nothing. A run's Cedar policy set digest is recorded with the run
(``runs.cedar_digest``), beside its profile and tool pool digests."""

from __future__ import annotations

from dataclasses import dataclass

from ledger._db import Conn, now_iso, sql
from ledger._statement import execute, rows_changed

__all__ = [
    "PolicyVersion",
    "RunPrincipal",
    "all_versions",
    "keep",
    "run_principal",
    "version",
]


@dataclass(frozen=True)
class PolicyVersion:
    digest: str
    kind: str  # profile | tool_pool | recipe | cedar
    policy_id: str
    body: str  # the file's text, exactly


def keep(conn: Conn, versions: list[PolicyVersion]) -> int:
    """Store the versions not stored yet; how many were new."""
    added = 0
    for v in versions:
        result = execute(
            conn,
            sql(
                "INSERT INTO policy_versions (digest, kind, policy_id, body, stored_at)"
                " VALUES (:d, :k, :p, :b, :t) ON CONFLICT (digest) DO NOTHING"
            ),
            {"d": v.digest, "k": v.kind, "p": v.policy_id, "b": v.body, "t": now_iso()},
        )
        added += rows_changed(result)
    return added


def version(conn: Conn, digest: str) -> PolicyVersion | None:
    row = execute(
        conn,
        sql("SELECT digest, kind, policy_id, body FROM policy_versions WHERE digest = :d"),
        {"d": digest},
    ).first()
    if row is None:
        return None
    return PolicyVersion(str(row[0]), str(row[1]), str(row[2]), str(row[3]))


@dataclass(frozen=True)
class RunPrincipal:
    """Who a run's Cedar requests are made for, and the policy set version it began under."""

    submitted_by: str
    cedar_digest: str | None


def run_principal(conn: Conn, run_id: str) -> RunPrincipal | None:
    row = execute(
        conn,
        sql("SELECT submitted_by, cedar_digest FROM runs WHERE run_id = :r"),
        {"r": run_id},
    ).first()
    if row is None:
        return None
    return RunPrincipal(str(row[0]), None if row[1] is None else str(row[1]))


def all_versions(conn: Conn) -> dict[str, PolicyVersion]:
    """Every kept version, by digest."""
    rows = execute(conn, sql("SELECT digest, kind, policy_id, body FROM policy_versions"))
    return {str(r[0]): PolicyVersion(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows}
