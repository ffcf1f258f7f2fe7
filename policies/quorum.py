"""How many distinct people must approve a plan under a profile.

``approval.quorum`` for any plan; ``approval.quorum_for_changes`` for a plan that
can change anything (not read-only: a step other than a note or an inline GET or
HEAD), when it asks for more. Pure: from the profile and the plan alone, so the
shim that records approvals and the page that shows them count alike.

``parties``: who may not decide on a plan. ``counted``: whose approvals count toward
its quorum. Nobody who wrote part of the plan may
approve it, so an approval of theirs on record was written before that rule reached
them (an editor further up a chain, when only the last editor was refused): it
stays in the ledger and counts for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set

from contracts import Plan, PlanAuthor, PolicyProfile
from policies.gate import read_only

__all__ = ["approvers_needed", "counted", "parties"]


def approvers_needed(profile: PolicyProfile, plan: Plan) -> int:
    approval = profile.approval
    changes = approval.quorum_for_changes
    if changes is not None and not read_only(plan):
        return max(approval.quorum, changes)
    return approval.quorum


def parties(
    profile: PolicyProfile, submitter: str, authors: Sequence[PlanAuthor]
) -> frozenset[str]:
    """Who may not decide on a plan: its submitter where the profile asks for four-eyes;
    and, whatever the profile says, everyone who wrote part of a plan that came
    through an edit or a fork (``authors``: the whole chain back to its first run)."""
    derived = any(a.part != "submitted" for a in authors)
    named = (frozenset(a.name for a in authors) | {submitter}) if derived else frozenset()
    return (named | {submitter}) if profile.approval.four_eyes else named


def counted(approved_by: Iterable[str], parties: Set[str]) -> list[str]:
    """The approvals that count, in order: each person once, none of ``parties``
    (those who may not decide on the plan)."""
    out: list[str] = []
    for name in approved_by:
        if name not in parties and name not in out:
            out.append(name)
    return out
