"""What the shim returns about runs (egress models) and takes for decisions."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from contracts._base import Closed, Digest, Identifier, ShortText
from contracts._json import JsonObject, JsonValue
from contracts.budgets import BudgetsView
from contracts.channels import RUN_VIEW_CHANNELS, TextChannel
from contracts.intent import Mode
from contracts.opa_run import OpaRunView
from contracts.plan import Plan

__all__ = [
    "ApprovalRequest",
    "ApprovalView",
    "CallView",
    "Decision",
    "DecisionAccepted",
    "EpisodeView",
    "PlanAuthor",
    "PlanCardView",
    "RunList",
    "RunStatus",
    "RunSummary",
    "RunView",
    "StepView",
]


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    PLANNED = "planned"  # plan-only runs end here
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    # A call to a callee without idempotency keys was interrupted: the run waits
    # for an operator to say whether it took effect (POST /calls/{op_key}/resolve).
    NEEDS_OPERATOR = "needs_operator"
    # POST /runs/{id}/cancel (or a cancel through DBOS): stopped at a step boundary.
    CANCELLED = "cancelled"
    # An interactive OPA run between turns: it waits for POST /runs/{id}/messages.
    WAITING_INPUT = "waiting_input"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = {
    RunStatus.PLANNED,
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.REJECTED,
    RunStatus.CANCELLED,
}


class Decision(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"


class ApprovalRequest(Closed):
    """Body of POST /approve/{id} and POST /reject/{id}."""

    plan_digest: Digest
    decided_by: Identifier = "anonymous"
    comment: ShortText | None = None


class PlanEditRequest(Closed):
    """Body of POST /runs/{id}/plan: an approver's edit of the plan waiting for a
    decision, made from the revision whose digest it names."""

    plan: Plan
    previous_digest: Digest
    comment: ShortText | None = None


class PlanEditAccepted(Closed):
    """The edit was taken: the plan it came from is rejected, and the edited plan
    waits on a run of its own for someone other than its editor and the submitter."""

    run_id: str
    parent_run_id: str
    previous_digest: Digest
    plan_digest: Digest
    edited_by: str
    links: dict[str, str]


class EditedFrom(Closed):
    """Where an edited plan came from: the run, the plan digest it replaced, its editor."""

    run_id: str
    plan_digest: Digest
    edited_by: str


class PlanAuthor(Closed):
    """Someone who wrote part of the plan a run decides on: who submitted it, an
    approver who edited it into a later run, or who asked for a fork of it. Nobody on
    a run's list decides on its plan or counts toward its quorum."""

    name: str
    part: Literal["submitted", "edited", "forked"]
    run_id: str  # the run in the chain where they did it


class QuorumView(Closed):
    """A plan that needs several approvers: how many, and who approved it so far."""

    needed: int
    approved_by: list[str]

    @property
    def missing(self) -> int:
        """How many more approvers the plan waits for (0: the quorum is met)."""
        return max(0, self.needed - len(self.approved_by))


class DecisionAccepted(Closed):
    run_id: str
    plan_digest: Digest
    decision: Decision
    decided_by: str
    recorded: bool  # False when the same decision was already on record
    # Set when the plan needs several approvers: an approval short of the quorum is
    # recorded and the plan still waits (``decided_by`` is then this approver).
    quorum: QuorumView | None = None


class PlanCardView(Closed):
    plan: Plan
    plan_digest: Digest
    status: str
    created_at: str
    # 1 for the compiled plan; each repaired remainder is a new revision, with the
    # digest it replaced and what changed (policies/repair.py plan_changes).
    revision: int = 1
    previous_digest: Digest | None = None
    changes: list[JsonValue] | None = None
    # Where the objective came from when it is outside data: the OPA archive (with
    # its verified signer), shown to approvers on the card they decide on.
    source: OpaRunView | None = None


class ApprovalView(Closed):
    plan_digest: Digest
    decision: Decision
    decided_by: str
    comment: str | None
    decided_at: str


class StepView(Closed):
    step_id: str
    position: int
    driver_kind: str
    connector_id: str
    status: Literal["succeeded", "failed", "skipped"]
    op_key: str | None
    output: JsonObject | None
    error_code: str | None
    error_message: str | None
    finished_at: str


class RunView(Closed):
    run_id: str
    intent_id: str
    recipe: str
    objective: str
    mode: Mode
    status: RunStatus
    phase: str
    submitted_by: str
    policy_profile: str
    tool_pool: str
    plan_digest: Digest | None
    profile_digest: Digest | None = None
    tool_pool_digest: Digest | None = None
    # The Cedar policy set the run is held to, when its profile names one.
    cedar_digest: Digest | None = None
    # Over the ordered (op_key, request digest, response digest) calls and the
    # plan digest; written when the run ends, reproduced by a replay.
    trace_digest: Digest | None = None
    random_seed: str | None = None
    parent_run_id: str | None = None  # set on a fork
    fork_from_step: int | None = None
    # The run's effective budgets and what it has spent of them (used / limit).
    budgets: BudgetsView | None = None
    # Set when the run came from an OPA archive: its objective is the archive's.
    opa: OpaRunView | None = None
    error_code: str | None
    error_message: str | None
    created_at: str
    updated_at: str
    plan_card: PlanCardView | None
    approvals: list[ApprovalView]
    steps: list[StepView]
    # Set while the current plan needs several approvers: who approved it so far.
    quorum: QuorumView | None = None
    # Set on a run an approver's edit started: where its plan came from.
    edited_from: EditedFrom | None = None
    # Everyone who wrote part of the current plan, from the first run of its chain of
    # edits and forks to this one (``PlanAuthor``).
    plan_authors: list[PlanAuthor] = Field(default_factory=list)
    # The plan's steps by risk class (read, change, outside world), as the shim judges
    # them with the run's own tool pool (``policies.risk``); None: no plan card yet.
    plan_risk: str | None = None
    links: dict[str, str]
    text_channels: dict[str, TextChannel] = Field(default_factory=lambda: dict(RUN_VIEW_CHANNELS))


class RunSummary(Closed):
    run_id: str
    recipe: str
    mode: Mode
    status: RunStatus
    phase: str
    created_at: str
    updated_at: str
    # What a list needs to tell runs apart: the objective (human_ui), who asked,
    # and why a run ended badly (the code only; the message is in the run view).
    objective: str | None = None
    submitted_by: str | None = None
    error_code: str | None = None


class RunList(Closed):
    runs: list[RunSummary]
    next_cursor: str | None = Field(default=None)


class CallResend(Closed):
    """One re-send of a call under its op_key, after its claim was interrupted."""

    at: str
    why: str
    executor_id: str


class CallView(Closed):
    """One ledger row, as an operator sees it."""

    op_key: Digest
    run_id: str
    step_id: str
    attempt: int
    kind: Literal["provider", "tool"]
    target: str
    # in_doubt: interrupted, waiting for an operator; applied / not_applied: resolved
    status: Literal["started", "completed", "failed", "in_doubt", "applied", "not_applied"]
    request_digest: Digest
    response_digest: Digest | None
    error_code: str | None
    started_at: str
    finished_at: str | None
    duration_ms: int | None
    # How many times Gatehouse handed the call to its callee under this op_key: once at
    # its claim, once more for each re-send (``resends``) after an interruption. A
    # callee that de-duplicates on the key heard it at most this often, acting once.
    sends: int = Field(default=1, ge=1)
    resends: list[CallResend] = Field(default_factory=list)


class EpisodeView(Closed):
    episode_id: str
    run_id: str
    step_id: str | None
    episode_type: str
    result_status: str
    body: JsonValue
    recorded_at: str
