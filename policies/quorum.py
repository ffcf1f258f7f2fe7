"""How many distinct people must approve a plan under a profile.

``approval.quorum`` for any plan; ``approval.quorum_for_changes`` for a plan that
can change anything (not read-only: a step other than a note or an inline GET or
HEAD), when it asks for more. Pure: from the profile and the plan alone, so the
shim that records approvals and the page that shows them count alike.
"""

from __future__ import annotations

from contracts import Plan, PolicyProfile
from policies.gate import read_only

__all__ = ["approvers_needed"]


def approvers_needed(profile: PolicyProfile, plan: Plan) -> int:
    approval = profile.approval
    changes = approval.quorum_for_changes
    if changes is not None and not read_only(plan):
        return max(approval.quorum, changes)
    return approval.quorum
