"""Replay: run a finished run's flow again with every call served from the ledger.

``replay_run`` executes ``worker._flow.run_intent`` — the same code the live
workflow runs — through ``ReplayPorts``: each planner and tool call builds
its request exactly as the live step does, then is answered by the ledger
entry of its op_key. Nothing is sent anywhere (no handler or planner is ever
invoked) and nothing is written. The replay ends with the trace digest it
computed, which must equal the one the run recorded when it ended.

A call without a ledger entry, or whose request digest differs from the
recorded one, is a divergence: the replay stops there and reports the step
and both digests. A fork's calls before its fork point are its parent's, so
they are looked up under the parent's run id (recursively, for a fork of a
fork).

The ``gatehouse.replay`` workflow lets the shim ask a worker for a replay
(the shim never imports this package).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

from dbos import DBOS
from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import Connection

from contracts import (
    REPLAY_WORKFLOW,
    Decision,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    Mode,
    PolicyProfile,
    ReplayDivergence,
    ReplayReport,
    ToolPool,
    digest_of,
    sha256_hex,
)
from ledger import (
    Database,
    approvals,
    calls,
    cancels,
    forks,
    intents,
    messages,
    opa_runs,
    policy_versions,
)
from ledger.cancels import Cancel
from ledger.forks import Lineage
from policies import catalog
from policies.catalog import Loaded
from policies.repair import check_revision, gated_plan
from worker._calls import Call, Performed
from worker._flow import run_intent
from worker._runtime import runtime
from worker._seed import planner_seed
from worker.records import (
    BeginResult,
    GateResult,
    RunEnd,
    StepRecord,
    plan_problem,
    step_verdict,
)
from worker.settings import WorkerSettings
from worker.steps_calls import (
    PlannerCall,
    ToolCall,
    prepare_planner,
    prepare_tool,
    settles_step,
)

__all__ = ["ReplayPorts", "replay_run", "replay_workflow", "trace_so_far"]


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
        conn: Connection,
        settings: WorkerSettings,
        chain: list[Lineage],
        rules: ReplayRules = "recorded",
    ) -> None:
        self.conn = conn  # one read-only connection for the whole replay
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
        for name, recorded, now in (
            ("policy profile", self.run.profile_digest, prof.digest),
            ("tool pool", self.run.tool_pool_digest, pool.digest),
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

    def _rules(self, today: Loaded[M], recorded: str | None, model: type[M]) -> Loaded[M]:
        """The version the run ran under, kept by its digest; today's file when asked
        for, when it is that very version, or when none was kept (a run recorded
        before versions were kept: a changed file is then a divergence)."""
        if self.rules == "current" or recorded is None or recorded == today.digest:
            return today
        kept = policy_versions.version(self.conn, recorded)
        if kept is None:
            return today
        try:
            parsed = model.model_validate_json(kept.body)
        except ValidationError as exc:
            raise GatehouseError(
                ErrorCode.CORRUPT_RECORD,
                f"the kept {kept.kind} {kept.policy_id!r} ({recorded[:12]}) does not load: {exc}",
            ) from exc
        if sha256_hex(kept.body.encode("utf-8")) != recorded:
            raise GatehouseError(
                ErrorCode.CORRUPT_RECORD,
                f"the kept {kept.kind} {kept.policy_id!r} no longer has digest {recorded[:12]}",
            )
        return Loaded(parsed, recorded, kept.body)

    def planner_call(self, raw: JsonObject) -> JsonObject:
        # A fork's planner call is its parent's, made with the parent's seed.
        owner = self._owner(None)
        seed = planner_seed(owner.random_seed or "", owner.run_id)
        spec = PlannerCall.model_validate({**raw, "run_id": owner.run_id, "seed": seed})
        return prepare_planner(spec, self.settings).answer(self._serve)

    def gate_and_card(
        self,
        run_id: str,
        raw_plan: JsonObject,
        profile: PolicyProfile,
        pool: ToolPool,
        mode: Mode,
        *,
        revise: JsonObject | None = None,
        repaired: bool = False,
        budgets: JsonObject | None = None,
    ) -> GateResult:
        _ = mode, repaired, budgets
        try:
            plan = gated_plan(raw_plan, profile, pool)
            digest = digest_of(plan.model_dump(mode="json"))
            if revise is not None:
                check_revision(plan, digest, revise)
        except GatehouseError as exc:
            return GateResult(ok=False, error_code=exc.code.value, error_message=exc.message)
        return GateResult(ok=True, plan=plan, plan_digest=digest)

    def await_decision(
        self, run_id: str, plan_digest: str, profile: PolicyProfile, at: str
    ) -> tuple[bool, str] | None:
        _ = profile, at
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

    def tool_call(self, raw: JsonObject) -> JsonObject:
        boundary = raw.get("boundary")
        if isinstance(boundary, str):  # the cancel check the live call made first
            found = self.cancelled(str(raw["run_id"]), boundary)
            if found is not None:
                return {"cancelled": found, "at": boundary}
        position = raw.get("position")
        owner = self._owner(position if isinstance(position, int) else 0)
        spec = ToolCall.model_validate({**raw, "run_id": owner.run_id})
        result = prepare_tool(spec, self.settings).answer(self._serve)
        if spec.record is None or not settles_step(spec, result):
            return result
        # the step's record the live call wrote with its completion
        return {**result, "recorded": _verdict(spec.step_id, result, spec.record.output_schema_ref)}

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


def _lineage(db: Database, run_id: str) -> list[Lineage]:
    chain: list[Lineage] = []
    next_id: str | None = run_id
    with db.engine.connect() as conn:
        while next_id is not None and len(chain) < 64:
            found = forks.lineage(conn, next_id)
            if found is None:
                break
            chain.append(found)
            next_id = found.parent_run_id
    return chain


def _run_flow(
    db: Database, settings: WorkerSettings, chain: list[Lineage], rules: ReplayRules = "recorded"
) -> tuple[ReplayPorts, list[ReplayDivergence]]:
    run = chain[0]
    with db.engine.connect() as conn:
        request = intents.request_for_run(conn, run.run_id)
        # a fork runs its parent's job: the archive is the first one up the lineage
        opa = next(
            (found for r in chain if (found := opa_runs.job(conn, r.run_id)) is not None), None
        )
    if request is None:
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, f"run {run.run_id!r} has no intent")
    job = IntentJob(run_id=run.run_id, intent_id=run.intent_id, request=request, opa=opa)
    divergences: list[ReplayDivergence] = []
    with db.engine.connect() as conn:
        ports = ReplayPorts(conn, settings, chain, rules)
        try:
            run_intent(job, run.run_id, ports)
        except DivergedError as stop:
            divergences.append(stop.divergence)
    return ports, divergences


def trace_so_far(db: Database, settings: WorkerSettings, run_id: str) -> str | None:
    """The trace digest the flow reaches over what the run recorded, finished or not.

    For a run whose workflow was cancelled through DBOS and so never ran its
    own finish: the sweep records this, and a later replay must reach it
    again. None when the recorded rows do not replay.
    """
    chain = _lineage(db, run_id)
    if not chain:
        return None
    ports, divergences = _run_flow(db, settings, chain)
    return None if divergences else ports.trace_digest


def replay_run(
    db: Database, settings: WorkerSettings, run_id: str, rules: ReplayRules = "recorded"
) -> ReplayReport:
    """Replay one finished run from its ledger; never calls out, never writes. Under
    the rules it ran under (``recorded``), or today's (``current``)."""
    chain = _lineage(db, run_id)
    if not chain:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
    run = chain[0]
    if not run.status.terminal:
        raise GatehouseError(
            ErrorCode.RUN_NOT_FINISHED,
            f"run {run_id!r} is {run.status.value}; only a finished run can be replayed",
            {"status": run.status.value},
        )
    ports, divergences = _run_flow(db, settings, chain, rules)
    replayed = ports.trace_digest if not divergences else None
    if not divergences and replayed != run.trace_digest:
        divergences.append(
            ReplayDivergence(
                kind="trace_digest",
                step_id=None,
                op_key=None,
                recorded_digest=run.trace_digest,
                replayed_digest=replayed,
                message="the replayed calls do not add up to the recorded trace digest",
            )
        )
    return ReplayReport(
        run_id=run_id,
        match=not divergences,
        recorded_trace_digest=run.trace_digest,
        replayed_trace_digest=replayed,
        calls=ports.served,
        outbound_calls=0,
        divergences=divergences,
        rules=rules,
    )


@DBOS.step(name="gatehouse.replay_run")
def _replay_step(run_id: str, rules: str = "recorded") -> JsonObject:
    rt = runtime()
    try:
        report = replay_run(
            rt.db, rt.settings, run_id, "current" if rules == "current" else "recorded"
        )
    except GatehouseError as exc:
        return {"error": exc.to_json()}
    return {"report": report.model_dump(mode="json")}


@DBOS.workflow(name=REPLAY_WORKFLOW)
def replay_workflow(run_id: str, rules: str = "recorded") -> JsonObject:
    """A replay asked for through the queue (POST /runs/{id}/replay)."""
    return _replay_step(run_id, rules)
