"""The intent flow: compile → gate → plan card → wait → execute → evidence.

Orchestration only, written once and run two ways through ``Ports``:

* live, as the DBOS workflow (``worker.workflow``): every port is a durable
  step, a message wait or a durable sleep;
* in a replay (``worker.replay``): every call is served from the ledger by
  op_key and nothing is written or sent.

No clock, randomness, network or file access here: every such thing is a
port, and random choices are drawn from the run's recorded seed, so a
recovered workflow and a replay take exactly the same path.
"""

from __future__ import annotations

from typing import Protocol

from contracts import (
    DriverKind,
    ErrorCode,
    GatehouseError,
    IntentJob,
    JsonObject,
    JsonValue,
    Mode,
    OnError,
    PlanStep,
    PolicyProfile,
    RunStatus,
    ToolPool,
    digest_of,
)
from policies.gate import check_step
from worker._inputs import resolve_input
from worker._seed import draw, planner_seed
from worker.steps_records import BeginResult, GateResult, RunEnd, StepRecord

__all__ = ["Ports", "Trace", "run_intent"]


class Ports(Protocol):
    """Everything the flow does that is not pure computation."""

    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult: ...

    def planner_call(self, raw: JsonObject) -> JsonObject: ...

    def gate_and_card(
        self, run_id: str, raw_plan: JsonObject, profile: PolicyProfile, pool: ToolPool, mode: Mode
    ) -> GateResult: ...

    def await_decision(
        self, run_id: str, plan_digest: str, profile: PolicyProfile
    ) -> tuple[bool, str] | None:
        """(approved, decided_by); None when no decision came in time."""
        ...

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult: ...

    def tool_call(self, raw: JsonObject) -> JsonObject: ...

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        """applied / not_applied: an operator's word on an in-doubt call."""
        ...

    def pause(self, seconds: float) -> None: ...

    def record_step_result(self, record: StepRecord) -> JsonObject: ...

    def finish(self, end: RunEnd) -> None: ...


class Trace:
    """The ordered calls a run consumed; its digest is the run's trace digest."""

    def __init__(self) -> None:
        self.entries: list[JsonValue] = []
        self.plan_digest: str | None = None

    def add(self, result: JsonObject) -> None:
        self.entries.append(
            [result.get("op_key"), result.get("request_digest"), result.get("response_digest")]
        )

    def resolution(self, op_key: str, outcome: str) -> None:
        self.entries.append([op_key, "resolution", outcome])

    def digest(self) -> str:
        return digest_of({"plan_digest": self.plan_digest, "calls": self.entries})


def _record(run_id: str, position: int, step: PlanStep, outcome: JsonObject) -> StepRecord:
    return StepRecord(
        run_id=run_id,
        step_id=step.step_id,
        position=position,
        driver_kind=step.driver_kind.value,
        connector_id=step.connector_id,
        outcome=outcome,
        output_schema_ref=step.output_schema_ref,
    )


def _applied(op_key: str) -> JsonObject:
    """A step whose in-doubt call an operator says did take effect: done, output unknown."""
    return {
        "ok": True,
        "op_key": op_key,
        "output": {"resolution": "applied", "op_key": op_key},
        "error_code": None,
        "error_message": None,
        "artifacts": [],
    }


class _Ladder:
    """The timeout ladder of one opencode step: revert → shrink scope → oc_timeout.

    Every turn it set aside (stalled, or undone after a crash) is kept with
    its output, so the step's evidence shows each rung.
    """

    def __init__(self, profile: PolicyProfile) -> None:
        self.shrink = profile.opencode.shrink_scope == "first_subgoal"
        self.turns: list[JsonValue] = []

    def note(self, outcome: JsonObject) -> None:
        self.turns.append(
            {
                "op_key": outcome.get("op_key"),
                "attempt": outcome.get("attempt"),
                "error_code": outcome.get("error_code"),
                "error_message": outcome.get("error_message"),
                "output": outcome.get("output"),
            }
        )

    def climb(self, outcome: JsonObject, *, narrowed: bool) -> bool:
        """Record a stalled turn; True when the narrowed re-prompt is still to come."""
        self.note(outcome)
        return self.shrink and not narrowed

    def attach(self, outcome: JsonObject) -> JsonObject:
        if not self.turns:
            return outcome
        output = outcome.get("output")
        merged: JsonObject = dict(output) if isinstance(output, dict) else {}
        merged["ladder"] = list(self.turns)
        return {**outcome, "output": merged}

    def give_up(self, last: JsonObject) -> JsonObject:
        """Rung 3: the step fails with oc_timeout; the workspace is as before the step."""
        output = last.get("output")
        before = output.get("workspace_before") if isinstance(output, dict) else None
        after = output.get("workspace_after") if isinstance(output, dict) else None
        rungs = "revert, shrink scope" if self.shrink else "revert"
        return {
            "ok": False,
            "op_key": last.get("op_key"),
            "output": {
                "ladder": list(self.turns),
                "workspace_before": before,
                "workspace_after": after,
            },
            "error_code": ErrorCode.OC_TIMEOUT.value,
            "error_message": f"the opencode step timed out; the ladder ({rungs}) did not"
            " recover it and the workspace was restored",
            "artifacts": last.get("artifacts", []),
        }


def run_intent(job: IntentJob, run_id: str, ports: Ports) -> JsonObject:
    """The whole flow of one run. ``run_id`` is the workflow's own id: a fork
    runs the parent's job under a new id."""
    return _Run(run_id, ports).go(job)


class _Run:
    def __init__(self, run_id: str, ports: Ports) -> None:
        self.run_id = run_id
        self.ports = ports
        self.trace = Trace()

    def end(
        self,
        status: RunStatus,
        summary: list[JsonValue],
        code: str | None = None,
        message: str | None = None,
    ) -> JsonObject:
        """Every way a run ends: status, trace digest and summary episode, one commit."""
        end = RunEnd(self.run_id, status, summary, code, message, self.trace.digest())
        self.ports.finish(end)
        return {"run_id": self.run_id, "status": status.value, "error_code": code, "steps": summary}

    def go(self, job: IntentJob) -> JsonObject:
        req, run_id, ports = job.request, self.run_id, self.ports
        begun = ports.begin(run_id, req.policy_profile, req.tool_pool)
        if not begun.ok or begun.profile is None or begun.tool_pool is None:
            return self.end(RunStatus.FAILED, [], begun.error_code, begun.error_message)
        profile, pool = begun.profile, begun.tool_pool
        seed = begun.seed or ""

        # 1 compile: a supplied plan (run-plan) or the planner's, through the ledger
        if req.plan is not None:
            raw_plan: JsonObject = req.plan.model_dump(mode="json")
        else:
            compiled = ports.planner_call(
                {
                    "run_id": run_id,
                    "recipe_id": req.recipe,
                    "objective": req.objective,
                    "parameters": req.parameters,
                    "profile": profile.model_dump(mode="json"),
                    "tool_pool": pool.model_dump(mode="json"),
                    "seed": planner_seed(seed, run_id),
                }
            )
            self.trace.add(compiled)
            output = compiled.get("output")
            plan_value = output.get("plan") if isinstance(output, dict) else None
            if not compiled.get("ok") or not isinstance(plan_value, dict):
                code = str(compiled.get("error_code") or ErrorCode.PLANNER_FAILED.value)
                message = str(compiled.get("error_message") or "")
                return self.end(RunStatus.FAILED, [], code, message)
            raw_plan = plan_value

        # 2 gate + 3 plan card
        gated = ports.gate_and_card(run_id, raw_plan, profile, pool, req.mode)
        if not gated.ok or gated.plan is None or gated.plan_digest is None:
            return self.end(RunStatus.FAILED, [], gated.error_code, gated.error_message)
        plan, digest = gated.plan, gated.plan_digest
        self.trace.plan_digest = digest
        if req.mode is Mode.PLAN_ONLY:
            return self.end(RunStatus.PLANNED, [])

        # 4 durable wait: the plan_approvals row decides; a message only wakes us early
        decided = ports.await_decision(run_id, digest, profile)
        if decided is None:
            message = f"no decision on plan {digest[:12]} within {profile.approval.timeout_s:.0f} s"
            return self.end(RunStatus.FAILED, [], ErrorCode.APPROVAL_TIMEOUT.value, message)
        if not decided[0]:
            return self.end(RunStatus.REJECTED, [])
        verified = ports.verify_plan(run_id, digest)
        if not verified.ok:  # the stored plan was changed after approval: run nothing
            return self.end(RunStatus.FAILED, [], verified.error_code, verified.error_message)

        # 5 execute, in order, each step re-checked against the policy right before it runs
        outputs: dict[str, JsonObject] = {}
        summary: list[JsonValue] = []
        for position, step in enumerate(plan.steps):
            try:
                step_input = resolve_input(step, outputs)
                connector = check_step(step, step_input, pool, profile)
            except GatehouseError as exc:
                refused: JsonObject = {
                    "ok": False,
                    "output": exc.details,
                    "error_code": exc.code.value,
                    "error_message": exc.message,
                    "op_key": None,
                    "artifacts": [],
                }
                ports.record_step_result(_record(run_id, position, step, refused))
                summary.append({"step_id": step.step_id, "ok": False, "error_code": exc.code.value})
                return self.end(RunStatus.FAILED, summary, exc.code.value, exc.message)

            call: JsonObject = {
                "run_id": run_id,
                "step_id": step.step_id,
                "position": position,
                "driver_kind": step.driver_kind.value,
                "connector": connector.model_dump(mode="json"),
                "input": step_input,
            }
            if step.driver_kind is DriverKind.OPENCODE:
                call["executor_policy"] = profile.opencode.model_dump(mode="json")
            outcome, attempts = self.settle(call, profile, seed)
            final = ports.record_step_result(_record(run_id, position, step, outcome))
            ok = bool(final.get("ok"))
            code_value = final.get("error_code")
            step_code = code_value if isinstance(code_value, str) else None
            summary.append(
                {"step_id": step.step_id, "ok": ok, "error_code": step_code, "attempts": attempts}
            )
            out = outcome.get("output")
            if ok and isinstance(out, dict):
                outputs[step.step_id] = out
            if not ok and step.on_error is OnError.FATAL:
                message = str(final.get("error_message") or "")
                code = step_code or ErrorCode.HANDLER_FAILED.value
                return self.end(RunStatus.FAILED, summary, code, message)

        # 6 evidence: the summary episode and the terminal status, in one commit
        return self.end(RunStatus.SUCCEEDED, summary)

    def settle(self, call: JsonObject, profile: PolicyProfile, seed: str) -> tuple[JsonObject, int]:
        """One step's tool call, attempt after attempt until its outcome is known:
        (outcome, attempts). An opencode turn that stalls climbs the timeout ladder."""
        step_id = str(call["step_id"])
        attempt = 1
        ladder = _Ladder(profile)
        while True:
            outcome = self.ports.tool_call({**call, "attempt": attempt})
            self.trace.add(outcome)
            code = outcome.get("error_code")
            if code == ErrorCode.OC_STALLED.value:
                # Rung 1 happened inside the turn (aborted, reverted, digest checked).
                if not ladder.climb(outcome, narrowed=bool(call.get("narrowed"))):
                    return ladder.give_up(outcome), attempt
                call = {**call, "narrowed": True}  # rung 2: once, narrowed
            elif code == ErrorCode.TURN_INTERRUPTED.value and attempt < profile.max_attempts:
                ladder.note(outcome)  # undone after a crash: sent again, new op_key
            elif code == ErrorCode.CALL_IN_DOUBT.value:
                # Never guess: a person says whether the interrupted call took effect.
                op_key = str(outcome.get("op_key") or "")
                resolved = self.ports.await_resolution(self.run_id, op_key, step_id)
                self.trace.resolution(op_key, resolved)
                if resolved == "applied":
                    return _applied(op_key), attempt
            elif code != ErrorCode.UPSTREAM_UNAVAILABLE.value or attempt >= profile.max_attempts:
                return ladder.attach(outcome), attempt
            else:  # certainly not applied: back off, then a new attempt
                jitter = draw(seed, "backoff", self.run_id, step_id, str(attempt))
                self.ports.pause(profile.retry_backoff_s * 2 ** (attempt - 1) * (0.5 + jitter))
            attempt += 1  # (in doubt and not applied: send it again, as a new attempt)
