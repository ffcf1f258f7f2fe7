"""What the ports answer the flow, and what the flow hands them to record.

The live ports (``worker.durable``) write these as JSON in DBOS checkpoints and
ledger rows; a replay and the tests' fakes build them in memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from contracts import (
    Closed,
    JsonObject,
    JsonValue,
    Mode,
    Plan,
    PolicyProfile,
    RunStatus,
    ToolPool,
)
from contracts.opa_run import OpaJob

__all__ = ["BeginResult", "GateResult", "Parked", "PlanGated", "RunEnd", "StepRecord"]


class Parked(Exception):  # noqa: N818 - a way a stretch ends, not an error
    """Raised by a wait port when nobody has decided yet: the run is parked at
    ``at`` (its rows say so) and this stretch of it ends here. Whoever decides
    hands the run to its next stretch, which goes on from the continuation the
    park wrote (at a decision) or runs the flow again from the start with every
    port before that wait answered from the ledger (at any other wait)."""

    def __init__(self, at: str, wait: int) -> None:
        super().__init__(f"parked at {at} (wait {wait})")
        self.at = at
        self.wait = wait


class BeginResult(Closed):
    """A run begun: the profile and tool pool it runs under, and its seed."""

    ok: bool
    profile: PolicyProfile | None = None
    profile_digest: str | None = None
    tool_pool: ToolPool | None = None
    tool_pool_digest: str | None = None
    seed: str | None = None
    error_code: str | None = None
    error_message: str | None = None


class GateResult(Closed):
    """A plan gated and on the plan card (its digest), or why it was refused."""

    ok: bool
    plan: Plan | None = None
    plan_digest: str | None = None
    error_code: str | None = None
    error_message: str | None = None


class PlanGated(Closed):
    """The gate's decision on a proposed plan (``worker.flow._gate.gate_plan``), made
    once in the flow, for a port to write: the plan on the card with its digest (and,
    for a revision, what it changed), or the refusal. A port decides nothing more."""

    run_id: str
    mode: Mode
    profile_id: str
    tool_pool_id: str
    repaired: bool = False  # the plan came from a repair call
    budgets: JsonObject | None = None  # used / limit so far
    previous_digest: str | None = None  # a revision: the digest of the plan it revises
    outside_data: str | None = None  # a revision that writes in the value this step takes
    plan: Plan | None = None
    plan_digest: str | None = None
    changes: list[JsonValue] | None = None  # a revision's changes, for the approver
    # the profile approves it itself ("policy:<profile>": every step is read-only)
    approved_by: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    error_details: JsonObject | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None

    def result(self) -> GateResult:
        """What the flow reads back once the port has written it."""
        if not self.ok:
            return GateResult(
                ok=False, error_code=self.error_code, error_message=self.error_message
            )
        return GateResult(ok=True, plan=self.plan, plan_digest=self.plan_digest)


@dataclass(frozen=True)
class StepRecord:
    """A finished step, as the flow hands it to be recorded."""

    run_id: str
    step_id: str
    position: int
    driver_kind: str
    connector_id: str
    outcome: JsonObject
    output_schema_ref: str | None = None
    budgets: JsonObject | None = None  # used / limit after this step (BudgetsView)

    def as_json(self) -> JsonObject:
        """The record as a record's transaction takes its input (``of_json`` reads it)."""
        return asdict(self)

    @classmethod
    def of_json(cls, raw: JsonObject) -> StepRecord:
        outcome, ref, budgets = raw["outcome"], raw.get("output_schema_ref"), raw.get("budgets")
        if not isinstance(outcome, dict):  # pragma: no cover - written by as_json
            raise TypeError("a step record's outcome must be an object")
        return cls(
            run_id=str(raw["run_id"]),
            step_id=str(raw["step_id"]),
            position=int(str(raw["position"])),
            driver_kind=str(raw["driver_kind"]),
            connector_id=str(raw["connector_id"]),
            outcome=outcome,
            output_schema_ref=ref if isinstance(ref, str) else None,
            budgets=budgets if isinstance(budgets, dict) else None,
        )


@dataclass(frozen=True)
class RunEnd:
    """How a run ends, as the flow hands it to be recorded."""

    run_id: str
    status: RunStatus
    steps: list[JsonValue]
    error_code: str | None
    error_message: str | None
    trace_digest: str
    budgets: JsonObject | None = None  # used / limit at the end (BudgetsView)
    opa: OpaJob | None = None  # an OPA run: its output archive is packed first
    follow_ups: list[JsonValue] | None = None  # an interactive run's turns after the first
