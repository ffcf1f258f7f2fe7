"""``/dashboard/approvals``: the runs waiting for a decision, as a queue (approvers).

Each row says what deciding it takes without opening it: the plan's highest risk
(``policies.risk``: read, change, outside world) and how many steps have which,
its step count, the time left before the wait expires (and denies the plan), and
what is still needed: an approver, or the rest of a quorum ("1 of 2 approvers").

Sorted and filtered by plain GET parameters, so the page needs no script:

* ``sort``: ``risk`` (the default: highest risk first, then least time left),
  ``left`` (least time left first), ``oldest`` (waiting longest first);
* ``risk``: ``read``, ``change`` or ``outside``, the plan's highest class;
* ``left``: ``1h``, ``8h``, ``1d`` or ``7d``, expiring within that time;
* ``needs``: ``first`` (nobody has approved it yet) or ``more`` (approved, short
  of its quorum: it needs another approver).

Any other value is this page's own error (422) naming the values it takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import GatehouseError, PolicyProfile, Role, RunSummary, visible
from ledger import run_views
from policies import catalog
from policies.quorum import approvers_needed, counted, parties
from policies.risk import Risk, plan_risks, risk_words
from shim.api.dashboard._pages import PageRoute, common, page, viewer
from shim.api.deps import ServiceDep
from shim.api.services import Service
from shim.tokens import Identity

__all__ = ["LEFT", "NEEDS", "RISKS", "SORTS", "Row", "kept", "ordered", "queue_context", "router"]

router = APIRouter(route_class=PageRoute)

_READ_AT_MOST = 200  # runs read for one page: a queue longer than this is a backlog

SORTS = {
    "risk": "highest risk first, then least time left",
    "left": "least time left first",
    "oldest": "waiting longest first",
}
RISKS = {"read": Risk.READ, "change": Risk.CHANGE, "outside": Risk.OUTSIDE}
LEFT = {"1h": 3600.0, "8h": 8 * 3600.0, "1d": 86400.0, "7d": 7 * 86400.0}
NEEDS = {"first": "a first approver", "more": "another approver (part of a quorum)"}


@dataclass(frozen=True)
class Row:
    run: RunSummary
    steps: int
    risk: Risk  # the plan's highest step class
    risk_line: str  # the classes that earn a ⚠, with their step counts
    expires_at: str | None
    left_s: float | None  # seconds until the wait expires; None: not known
    needed: int  # approvers the plan needs
    approved: int  # of them, approvals that count so far

    @property
    def left(self) -> str:
        return "not known" if self.left_s is None else _in_words(self.left_s)

    @property
    def soon(self) -> bool:
        return self.left_s is not None and self.left_s < 3600

    @property
    def needs(self) -> str:
        if self.needed < 2:
            return "an approver"
        return f"{self.approved} of {self.needed} approvers"


def _in_words(seconds: float) -> str:
    """Time left as people say it: ``2 d 3 h``, ``5 h 10 min``, ``4 min``."""
    if seconds <= 0:
        return "expired (being closed)"
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _profile(profile_id: str) -> PolicyProfile | None:
    try:
        return catalog.profile(profile_id).model
    except GatehouseError:  # a profile since removed: nothing to count a quorum by
        return None


def _row(found: run_views.Awaiting, now: datetime) -> Row:
    left = None
    if found.expires_at is not None:
        until = datetime.fromisoformat(found.expires_at.replace("Z", "+00:00"))
        left = (until - now).total_seconds()
    card = found.card
    if card is None:  # nothing to read the plan from: nothing says it is safe
        return Row(found.run, 0, Risk.OUTSIDE, "no plan card", found.expires_at, left, 1, 0)
    risks = plan_risks(
        card.plan, catalog.tool_pool_if_here(found.tool_pool, found.tool_pool_digest)
    )
    needed, approved = 1, 0
    profile = _profile(found.policy_profile)
    if profile is not None:
        needed = approvers_needed(profile, card.plan)
        barred = parties(profile, found.run.submitted_by or "", found.authors)  # as decide does
        approved = len(counted(found.endorsed_by, barred))
    highest = max(risks, key=lambda r: r.rank)
    return Row(
        found.run, len(risks), highest, risk_words(risks), found.expires_at, left, needed, approved
    )


def _queue(service: Service) -> list[Row]:
    now = datetime.now(UTC)
    with service.db.engine.connect() as conn:
        waiting = run_views.awaiting_decision(conn, _READ_AT_MOST)
    return [_row(w, now) for w in waiting]


def _never(row: Row) -> float:
    return math.inf if row.left_s is None else row.left_s


def ordered(rows: list[Row], sort: str) -> list[Row]:
    oldest = sorted(rows, key=lambda r: (r.run.updated_at, r.run.run_id))
    if sort == "left":
        return sorted(oldest, key=lambda r: (_never(r), -r.risk.rank))
    if sort == "risk":
        return sorted(oldest, key=lambda r: (-r.risk.rank, _never(r)))
    return oldest


def kept(row: Row, risk: str, left: str, needs: str) -> bool:
    if risk and row.risk is not RISKS[risk]:
        return False
    if left and (row.left_s is None or row.left_s > LEFT[left]):
        return False
    if needs == "first" and row.approved > 0:
        return False
    return not (needs == "more" and not (0 < row.approved < row.needed))


def _refused(name: str, given: str, allowed: dict[str, object]) -> str | None:
    if given == "" or given in allowed:
        return None
    shown = visible(given if len(given) <= 40 else given[:39] + "…")
    return f"There is no {name} “{shown}”: it takes one of {', '.join(allowed)}."


def queue_context(
    rows: list[Row], waiting: int, chosen: dict[str, str], problems: list[str]
) -> dict[str, object]:
    """What ``approvals.html`` is given, besides the frame (``common``)."""
    return {"runs": rows, "waiting": waiting, "chosen": chosen, "problems": problems,
            "sorts": SORTS, "needs_words": NEEDS, "lefts": list(LEFT)}  # fmt: skip


@router.get("/dashboard/approvals")
async def approvals_page(
    request: Request,
    me: Annotated[Identity, Depends(viewer(Role.APPROVER, Role.OPERATOR))],
    service: ServiceDep,
    *,
    sort: str = "risk",
    risk: str = "",
    left: str = "",
    needs: str = "",
) -> Response:
    chosen = {"sort": sort, "risk": risk, "left": left, "needs": needs}
    checks = (("sort", sort, SORTS), ("risk", risk, RISKS), ("left", left, LEFT),
              ("needs", needs, NEEDS))  # fmt: skip
    problems = [p for p in (_refused(*c) for c in checks) if p is not None]
    if problems:
        ctx = queue_context([], 0, chosen, problems)
        return page("approvals.html", http_status=422, **ctx, **common(request, me))
    rows = await run_in_threadpool(_queue, service)
    shown = [r for r in ordered(rows, sort or "risk") if kept(r, risk, left, needs)]
    ctx = queue_context(shown, len(rows), chosen, [])
    return page("approvals.html", **ctx, **common(request, me))
