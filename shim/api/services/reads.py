"""Reading runs and their evidence: what the read routes and the dashboard show.

A submitter sees only the runs it submitted; approvers and operators see all.
A run that does not exist is ``run_not_found`` before anything else is read.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from contracts import (
    CallView,
    EpisodeView,
    ErrorCode,
    GatehouseError,
    JsonObject,
    QuorumView,
    Role,
    RunList,
    RunStatus,
    RunView,
)
from ledger import anchors, approvals, call_views, chain_verify, evidence, run_views, runs
from policies import catalog
from policies.quorum import approvers_needed, counted, parties
from policies.risk import plan_risk
from shim.api.services.acting import run_links
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = [
    "artifact",
    "artifacts",
    "episodes",
    "ledger",
    "run",
    "run_list",
    "security_events",
    "seen_status",
    "status",
    "verify_ledger",
]


def status(service: Service, run_id: str) -> RunStatus | None:
    """A run's status alone (one row); None when there is no such run."""
    with service.db.engine.connect() as conn:
        return runs.run_status(conn, run_id)


def _with_quorum(conn: Connection, view: RunView) -> RunView:
    """The view with who approved its plan so far, when the plan needs several."""
    card = view.plan_card
    if card is None:
        return view
    try:
        profile = catalog.profile(view.policy_profile).model
    except GatehouseError:  # a profile since removed: nothing to count by
        return view
    needed = approvers_needed(profile, card.plan)
    if needed < 2:
        return view
    barred = parties(profile, view.submitted_by, view.plan_authors)  # as decide counts
    so_far = counted(approvals.endorsers(conn, view.run_id, card.plan_digest), barred)
    return view.model_copy(update={"quorum": QuorumView(needed=needed, approved_by=so_far)})


def _with_risk(view: RunView) -> RunView:
    """The view with its plan's steps by risk class, judged with the run's own tool pool
    when this shim has it at the run's digest (``policies.risk.plan_risk``)."""
    card = view.plan_card
    if card is None:
        return view
    pool = catalog.tool_pool_if_here(view.tool_pool, view.tool_pool_digest)
    return view.model_copy(update={"plan_risk": plan_risk(card.plan, pool)})


def run(service: Service, run_id: str, who: Identity | None = None) -> RunView:
    """One run. A submitter sees only its own runs; approvers and operators see all."""
    with service.db.engine.connect() as conn:
        view = run_views.get_run(conn, run_id, run_links(run_id, who))
        if view is not None:
            view = _with_risk(_with_quorum(conn, view))
    if view is None:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    _may_read(who, view.submitted_by)
    return view


def seen_status(service: Service, run_id: str, who: Identity | None = None) -> RunStatus:
    """A run's status, under the rules ``run`` reads the whole run by (one row)."""
    with service.db.engine.connect() as conn:
        found = runs.status_and_submitter(conn, run_id)
    if found is None:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    _may_read(who, found[1])
    return found[0]


def _may_read(who: Identity | None, submitted_by: str) -> None:
    privileged = who is None or who.has(Role.OPERATOR, Role.APPROVER)
    if not privileged and who is not None and submitted_by != who.name:
        raise GatehouseError(ErrorCode.FORBIDDEN, f"{who.name} may read only the runs it submitted")


def run_list(
    service: Service,
    status: RunStatus | None,
    limit: int,
    cursor: str | None,
    who: Identity | None = None,
    *,
    recipe: str | None = None,
) -> RunList:
    """A page of runs, newest first. A submitter lists only its own runs;
    approvers and operators list all (as they may read any)."""
    mine = None if who is None or who.has(Role.OPERATOR, Role.APPROVER) else who.name
    with service.db.engine.connect() as conn:
        found = run_views.list_runs(
            conn, status, limit + 1, cursor, submitted_by=mine, recipe=recipe
        )
    more = len(found) > limit
    page = found[:limit]
    nxt = f"{page[-1].created_at}|{page[-1].run_id}" if more and page else None
    return RunList(runs=page, next_cursor=nxt)


def _exists(conn: Connection, run_id: str) -> None:
    if runs.run_status(conn, run_id) is None:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")


def ledger(service: Service, run_id: str) -> list[CallView]:
    with service.db.engine.connect() as conn:
        _exists(conn, run_id)
        return call_views.list_calls(conn, run_id)


def verify_ledger(service: Service, run_id: str) -> JsonObject:
    # The run's checkpoints, from the anchor file (outside the database: a rewrite
    # of the database cannot reach it) and from the database.
    filed = anchors.from_file(service.settings.anchor_file, run_id)
    with service.db.engine.connect() as conn:
        _exists(conn, run_id)
        return chain_verify.verify(conn, run_id, anchors.of_run(conn, run_id) + filed).to_json()


def episodes(service: Service, run_id: str) -> list[EpisodeView]:
    with service.db.engine.connect() as conn:
        _exists(conn, run_id)
        return evidence.list_episodes(conn, run_id)


def artifacts(service: Service, run_id: str) -> list[dict[str, str | int]]:
    with service.db.engine.connect() as conn:
        _exists(conn, run_id)
        return evidence.run_artifacts(conn, run_id)


def artifact(service: Service, digest: str) -> tuple[str, bytes]:
    """(media type, bytes) of the artifact with this SHA-256."""
    with service.db.engine.connect() as conn:
        found = evidence.get_artifact(conn, digest)
    if found is None:
        raise GatehouseError(ErrorCode.ARTIFACT_NOT_FOUND, f"no artifact {digest}")
    return found


def security_events(service: Service, limit: int) -> list[JsonObject]:
    with service.db.engine.connect() as conn:
        return evidence.list_security_events(conn, limit)
