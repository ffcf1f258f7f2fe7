"""The ports a replay runs the flow through: every call answered from the ledger.

``ReplayPorts`` implements ``worker.flow.Ports`` the way ``worker.replay`` needs it:
each planner and tool call builds its request exactly as the live step does and
is answered by the ledger entry of its op_key (looked up under the parent run for
a fork's calls before its fork point); nothing is sent and nothing is written. A
missing entry or a request digest that differs from the recorded one raises
``DivergedError`` with the step and both digests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

from pydantic import BaseModel
from sqlalchemy.engine import Connection

from contracts import (
    Continuation,
    Decision,
    ErrorCode,
    GatehouseError,
    JsonObject,
    PolicyProfile,
    ReplayDivergence,
    ToolPool,
    digest_of,
)
from ledger import (
    approvals,
    calls,
    cancels,
    messages,
    policy_versions,
)
from ledger.cancels import Cancel
from ledger.forks import Lineage
from policies import catalog, cedar_gate, their_time
from policies.catalog import Loaded
from policies.their_time import Kept
from worker.calls import (
    Call,
    Performed,
    PlannerCall,
    ToolCall,
    prepare_planner,
    prepare_tool,
    settles_step,
)
from worker.flow import (
    BeginResult,
    CallOutcome,
    GateResult,
    PlanGated,
    RunEnd,
    StepRecord,
    planner_seed,
)
from worker.records import plan_problem, step_verdict
from worker.runtime import WorkerSettings

__all__ = ["DivergedError", "ReplayPorts", "ReplayRules"]


M = TypeVar("M", bound=BaseModel)
ReplayRules = Literal["recorded", "current"]


class DivergedError(Exception):
    def __init__(self, divergence: ReplayDivergence) -> None:
        super().__init__(divergence.message)
        self.divergence = divergence


class ReplayPorts:
    """The flow's ports, read-only, answered from the database."""

    def __init__(
        self,
        conn: Connection | None,
        settings: WorkerSettings,
        chain: list[Lineage],
        rules: ReplayRules = "recorded",
    ) -> None:
        # One read-only connection for the whole replay; a stretch of a live run
        # gives one for each answer instead (``worker.durable``).
        self._conn = conn
        self.settings = settings
        # "recorded": the profile and tool pool versions the run ran under (kept by
        # digest in policy_versions); "current": today's files, a "would it still
        # pass" check that reports a changed file as a policy_digest divergence.
        self.rules = rules
        self.chain = chain  # the run, then its parent, grandparent…
        self.run = chain[0]
        self.served = 0
        self.trace_digest: str | None = None
        # Each run's cancel row (or its absence), read once: a finished run's is final.
        self._cancels: dict[str, Cancel | None] = {}
        # Every ledger entry of the lineage, read once: a finished run's entries are final.
        self._calls: dict[str, calls.CallRow] | None = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            raise RuntimeError("a replay's ports read with no connection given")
        return self._conn

    @conn.setter
    def conn(self, conn: Connection) -> None:
        self._conn = conn

    def _entry(self, key: str) -> calls.CallRow | None:
        if self._calls is None:
            self._calls = calls.of_runs(self.conn, [r.run_id for r in self.chain])
        return self._calls.get(key)

    # -- whose ledger entries a call is
    def _owner(self, position: int | None) -> Lineage:
        """The run whose op_keys this call used: a fork's parent for steps before
        its fork point (and for the planner call, which precedes every step)."""
        for here in self.chain:
            fork_at = here.fork_from_step
            if fork_at is None or (position is not None and position >= fork_at - 1):
                return here
        return self.chain[-1]

    def _serve(self, call: Call, _perform: Callable[[str], Performed]) -> JsonObject:
        """The ledger's answer to ``call``; ``_perform`` is never invoked."""
        row = self._entry(call.op_key)
        replayed = digest_of(call.request)
        if row is None or (row.status == "started"):
            raise DivergedError(
                ReplayDivergence(
                    kind="missing_entry",
                    step_id=call.step_id,
                    op_key=call.op_key,
                    recorded_digest=None if row is None else row.request_digest,
                    replayed_digest=replayed,
                    message=f"the ledger has no finished entry for the {call.target} call of"
                    f" step {call.step_id!r} (attempt {call.attempt})",
                )
            )
        if row.request_digest != replayed:
            raise DivergedError(
                ReplayDivergence(
                    kind="request_digest",
                    step_id=call.step_id,
                    op_key=call.op_key,
                    recorded_digest=row.request_digest,
                    replayed_digest=replayed,
                    message=f"the {call.target} call of step {call.step_id!r} would send another"
                    " request than the one recorded",
                )
            )
        self.served += 1
        if row.status == "in_doubt" or row.status in calls.RESOLVED:
            return call.result(call.in_doubt(), from_ledger=True)
        if row.response is None:  # pragma: no cover - finished rows carry a response
            raise GatehouseError(ErrorCode.CORRUPT_RECORD, "a finished entry has no response")
        return call.result(row.response, from_ledger=True, duration_ms=row.duration_ms)

    # -- the ports
    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult:
        seed = self.run.random_seed
        try:
            prof = self._rules(catalog.profile(profile_id), self.run.profile_digest, PolicyProfile)
            pool = self._rules(catalog.tool_pool(tool_pool_id), self.run.tool_pool_digest, ToolPool)
        except GatehouseError as exc:
            return BeginResult(
                ok=False, seed=seed, error_code=exc.code.value, error_message=exc.message
            )
        who = policy_versions.run_principal(self.conn, run_id)
        cedar_recorded = None if who is None else who.cedar_digest
        prof = self._cedar(prof, cedar_recorded, None if who is None else who.submitted_by)
        rules = prof.model.cedar_rules
        for name, recorded, now in (
            ("policy profile", self.run.profile_digest, prof.digest),
            ("tool pool", self.run.tool_pool_digest, pool.digest),
            ("Cedar policy set", cedar_recorded, None if rules is None else rules.digest),
        ):
            if recorded is not None and recorded != now:
                raise DivergedError(
                    ReplayDivergence(
                        kind="policy_digest",
                        step_id=None,
                        op_key=None,
                        recorded_digest=recorded,
                        replayed_digest=now,
                        message=f"the {name} changed since the run: a replay would be held"
                        " to other rules",
                    )
                )
        return BeginResult(
            ok=True,
            profile=prof.model,
            profile_digest=prof.digest,
            tool_pool=pool.model,
            tool_pool_digest=pool.digest,
            seed=seed,
        )

    def _kept(self, digest: str) -> Kept | None:
        """The version kept by ``digest``: none looked up under today's rules."""
        return None if self.rules == "current" else policy_versions.version(self.conn, digest)

    def _cedar(
        self, prof: Loaded[PolicyProfile], recorded: str | None, submitted_by: str | None
    ) -> Loaded[PolicyProfile]:
        """The profile with the Cedar policy set the run began under
        (``policies.their_time``), its requests made for the run's submitter."""
        model = prof.model
        if model.cedar is None:
            return prof
        rules = their_time.cedar_rules(model, recorded, self._kept)
        if rules is None:
            raise GatehouseError(
                ErrorCode.CORRUPT_RECORD,
                f"profile {model.profile_id!r} names Cedar policy set {model.cedar!r}, which"
                " is neither in force nor kept",
            )
        held = cedar_gate.bound(model.model_copy(update={"cedar_rules": rules}), submitted_by)
        return Loaded(held, prof.digest, prof.text)

    def _rules(self, today: Loaded[M], recorded: str | None, model: type[M]) -> Loaded[M]:
        """The version the run ran under (``policies.their_time``); today's under
        today's rules."""
        found = their_time.version(model, today, recorded, self._kept)
        return today if found is None else found

    def planner_call(self, call: PlannerCall) -> JsonObject:
        # A fork's planner call is its parent's, made with the parent's seed.
        owner = self._owner(None)
        seed = planner_seed(owner.random_seed or "", owner.run_id)
        spec = call.model_copy(update={"run_id": owner.run_id, "seed": seed})
        return prepare_planner(spec, self.settings).answer(self._serve)

    def gate_and_card(self, gated: PlanGated) -> GateResult:
        return gated.result()  # the flow decided it again; the card is on record

    def await_decision(
        self,
        run_id: str,
        plan_digest: str,
        profile: PolicyProfile,
        at: str,
        *,
        then: Callable[[], Continuation],
    ) -> tuple[bool, str] | None:
        _ = profile, at, then  # a replay parks nothing: it runs the whole flow
        found = approvals.decision_for(self.conn, run_id, plan_digest)
        if found is None:
            return None
        return found.decision is Decision.APPROVED, found.decided_by

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        _ = profile
        found = messages.get(self.conn, run_id, turn)
        return None if found is None else found.as_json()

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult:
        problem = plan_problem(self.conn, run_id, plan_digest, history=True)
        if problem is None:
            return GateResult(ok=True)
        return GateResult(ok=False, error_code=ErrorCode.PLAN_TAMPERED.value, error_message=problem)

    def tool_call(self, call: ToolCall) -> CallOutcome:
        if call.boundary is not None:  # the cancel check the live call made first
            found = self.cancelled(call.run_id, call.boundary)
            if found is not None:
                return CallOutcome.stopped(found)
        spec = call.model_copy(update={"run_id": self._owner(call.position).run_id})
        result = prepare_tool(spec, self.settings).answer(self._serve)
        if spec.record is None or not settles_step(spec, result):
            return CallOutcome(result)
        # the step's record the live call wrote with its completion
        recorded = _verdict(spec.step_id, result, spec.record.output_schema_ref)
        return CallOutcome({**result, "recorded": recorded})

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        # Answered from what the live run recorded: the boundary it stopped at.
        if run_id not in self._cancels:
            self._cancels[run_id] = cancels.get(self.conn, run_id)
        found = self._cancels[run_id]
        if found is None or found.observed_at != at:
            return None
        return found.answer()

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        row = self._entry(op_key)
        if row is None or row.status not in calls.RESOLVED:
            raise DivergedError(
                ReplayDivergence(
                    kind="missing_entry",
                    step_id=step_id,
                    op_key=op_key,
                    recorded_digest=None,
                    replayed_digest=None,
                    message=f"the in-doubt call of step {step_id!r} was never resolved",
                )
            )
        return row.status

    def pause(self, seconds: float) -> None:
        _ = seconds  # a replay does not wait out backoffs

    def record_step_result(self, record: StepRecord) -> JsonObject:
        return _verdict(record.step_id, record.outcome, record.output_schema_ref)

    def finish(self, end: RunEnd) -> None:
        self.trace_digest = end.trace_digest


def _verdict(step_id: str, outcome: JsonObject, output_schema_ref: str | None) -> JsonObject:
    """What recording the step answered live: its final ok / error_code / error_message."""
    ok, _output, code, message = step_verdict(step_id, outcome, output_schema_ref)
    return {"ok": ok, "error_code": code, "error_message": message}
