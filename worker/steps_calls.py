"""The two call steps: the planner (provider) call and the tool call.

Their names are stable (``gatehouse.planner_call``, ``gatehouse.tool_call``):
DBOS records them in every workflow's history, and tests register fakes
under the same names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.engine import Connection

from contracts import (
    Connector,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    OpencodePolicy,
    PolicyProfile,
    ToolPool,
    digest_of,
)
from contracts._base import Closed
from contracts.execution import ExecutionEnvelope, TurnAllowance
from contracts.opa_run import OpaJob
from contracts.recipe import Recipe
from ledger import calls
from policies import catalog
from policies.templates import compile_template
from worker._calls import Call, Performed, call_step, refusal, through_ledger
from worker._runtime import runtime
from worker._storage import wait_for_space
from worker.coordinator.envelopes import build_envelope
from worker.coordinator.executor import check, deliver, performed_of
from worker.flow import Spent
from worker.handlers import opencode as opencode_handler
from worker.handlers._base import HandlerResult
from worker.handlers.registry import HANDLERS
from worker.opa.unpack import unpack
from worker.providers.openai_compat import (
    ModelSettings,
    PlannerInput,
    plan_and_usage,
    request_body,
)
from worker.providers.opencode import CompileTurn, compile_request
from worker.records.cancels import observe_cancel
from worker.records.steps import write_step
from worker.settings import WorkerSettings

__all__ = [
    "COMPILE_STEP_ID",
    "PlannerCall",
    "Prepared",
    "StepRecordSpec",
    "ToolCall",
    "planner_call",
    "prepare_planner",
    "prepare_tool",
    "settles_step",
    "tool_call",
]

# The ledger step id of the planner call. Plan step ids start with a letter,
# so this can never collide with one.
COMPILE_STEP_ID = "@compile"

# Callees that de-duplicate on the op_key (or have no effect at all): an
# interrupted call to them may be sent again with the same key.
_IDEMPOTENT = {DriverKind.NOOP, DriverKind.HTTP}


class PlannerCall(Closed):
    run_id: str
    recipe_id: str
    objective: str
    parameters: JsonObject
    profile: PolicyProfile
    tool_pool: ToolPool
    seed: int | None = None  # drawn from the run's seed; sent to model planners
    # A repair call (see policies/repair.py): its ledger step id, and what the
    # planner is told; None for the first compile.
    call_id: str = COMPILE_STEP_ID
    repair: JsonObject | None = None


class StepRecordSpec(Closed):
    """What the record of a step needs besides its call's result."""

    connector_id: str
    output_schema_ref: str | None = None
    spent: JsonObject  # the run's budget account before this call (Spent.state_json)


class ToolCall(Closed):
    run_id: str
    step_id: str
    position: int = 0  # the step's place in the plan (0-based)
    attempt: int
    driver_kind: DriverKind
    connector: Connector
    input: JsonObject
    # opencode steps only: the profile's executor policy, and whether this is the
    # timeout ladder's narrowed re-prompt.
    executor_policy: OpencodePolicy | None = None
    narrowed: bool = False
    allowance: TurnAllowance | None = None  # what is left of the run's budgets
    opa: OpaJob | None = None  # the run came from an OPA archive
    unsandboxed_shell: Literal["allowed"] | None = None  # the profile allows it in so many words
    unsandboxed_opencode: Literal["allowed"] | None = None  # likewise, for opencode steps
    # The step boundary checked for a cancel before the call is claimed (its first
    # attempt only), and what the step's record needs when the call settles it.
    boundary: str | None = None
    record: StepRecordSpec | None = None


# Codes after which the flow may call again (or wait for a person): such a
# result does not settle its step at once, so its record is written later.
_NOT_FINAL = frozenset(
    {
        ErrorCode.UPSTREAM_UNAVAILABLE.value,
        ErrorCode.CALL_IN_DOUBT.value,
        ErrorCode.TURN_INTERRUPTED.value,
        ErrorCode.OC_STALLED.value,
    }
)


def settles_step(spec: ToolCall, result: JsonObject) -> bool:
    """Whether this call's result is its step's outcome, recorded with the call."""
    return spec.record is not None and result.get("error_code") not in _NOT_FINAL


def _performed(result: HandlerResult) -> Performed:
    return Performed(
        ok=result.ok,
        output=result.output,
        error_code=result.error_code,
        error_message=result.error_message,
        artifacts=result.artifacts,
    )


def _settled(result: HandlerResult | None) -> Performed | None:
    return None if result is None else _performed(result)


def _compile(
    spec: PlannerCall,
    planner: str,
    request: JsonObject,
    reconcile: Callable[[str], Performed | None] | None = None,
) -> Call:
    """A planner call of a run: the compile, or a repair; both planners de-duplicate
    on its key."""
    return Call(
        run_id=spec.run_id,
        step_id=spec.call_id,
        attempt=1,
        kind="provider",
        target=planner,
        request=request,
        idempotent=True,
        reconcile=reconcile,
    )


@dataclass(frozen=True)
class Prepared:
    """A call ready to go through the ledger, or the answer when it was refused
    before anything could be called (nothing to ledger, in either mode)."""

    call: Call | None
    perform: Callable[[str], Performed] | None = None
    refused: JsonObject | None = None

    def answer(self, serve: Callable[[Call, Callable[[str], Performed]], JsonObject]) -> JsonObject:
        """``serve``'s answer for the call: live, ``through_ledger``; in a replay, the ledger."""
        if self.call is None or self.perform is None:
            return self.refused if self.refused is not None else {}
        return serve(self.call, self.perform)


def _planner_input(spec: PlannerCall, recipe: Recipe) -> PlannerInput:
    return PlannerInput(
        objective=spec.objective,
        parameters=spec.parameters,
        recipe=recipe,
        tool_pool=spec.tool_pool,
        instruction=spec.profile.planner_instruction,
        max_tokens=spec.profile.max_planner_tokens,
        seed=spec.seed,
        repair=spec.repair,
    )


def _unanswered(spec: PlannerCall, exc: GatehouseError) -> Prepared:
    """A planner call refused before anything could be called: nothing to ledger."""
    response = refusal(exc).response([])
    refused: JsonObject = {
        "op_key": None,
        "step_id": spec.call_id,
        "attempt": 1,
        "from_ledger": False,
        "request_digest": None,
        "response_digest": digest_of(response),
        **response,
    }
    return Prepared(None, refused=refused)


def prepare_planner(spec: PlannerCall, settings: WorkerSettings) -> Prepared:
    loaded = catalog.recipe(spec.recipe_id)
    recipe = loaded.model
    if recipe.planner == "template":
        if spec.repair is not None:
            fixed = GatehouseError(
                ErrorCode.PLANNER_FAILED,
                f"recipe {recipe.recipe_id!r} compiles a fixed template; it cannot repair a plan",
            )
            return _unanswered(spec, fixed)
        request: JsonObject = {
            "planner": "recipe",
            "recipe_id": recipe.recipe_id,
            "recipe_digest": loaded.digest,
            "objective": spec.objective,
            "parameters": spec.parameters,
        }

        def perform_template(_key: str) -> Performed:
            try:
                catalog.check_parameters(recipe, spec.parameters)
                plan = compile_template(recipe, spec.objective, spec.parameters)
            except GatehouseError as exc:
                return refusal(exc)
            return Performed(ok=True, output={"plan": plan})

        return Prepared(_compile(spec, "recipe", request), perform_template)

    if recipe.planner == "opencode":
        turn = CompileTurn(
            settings,
            spec.run_id,
            spec.call_id,
            compile_request(_planner_input(spec, recipe)),
            spec.profile.opencode,
            unsandboxed=spec.profile.unsandboxed_opencode == "allowed",
        )

        def perform_opencode(key: str) -> Performed:
            try:
                return _performed(turn.run(key))
            except GatehouseError as exc:
                return refusal(exc)

        def reconcile_opencode(key: str) -> Performed | None:
            return _settled(turn.reconcile(key))

        call = _compile(spec, "opencode", turn.request, reconcile_opencode)
        return Prepared(call, perform_opencode)

    if settings.model_base_url is None:
        unavailable = GatehouseError(
            ErrorCode.PLANNER_UNAVAILABLE,
            f"recipe {recipe.recipe_id!r} needs a model planner; set GATEHOUSE_MODEL_BASE_URL",
        )
        return _unanswered(spec, unavailable)
    model = ModelSettings(
        base_url=settings.model_base_url, model=settings.model_name, api_key=settings.model_api_key
    )
    planner_input = _planner_input(spec, recipe)
    body = request_body(model, planner_input)

    def perform_model(key: str) -> Performed:
        try:
            plan, usage = plan_and_usage(model, planner_input, key)
        except GatehouseError as exc:
            return refusal(exc)
        # The usage is recorded with the plan: the run's budgets count it from the ledger.
        return Performed(ok=True, output={"plan": plan, "usage": usage})

    request = {"planner": "openai_compat", "body": body}
    return Prepared(_compile(spec, "openai_compat", request), perform_model)


@call_step("gatehouse.planner_call")
def planner_call(raw: JsonObject) -> JsonObject:
    return prepare_planner(PlannerCall.model_validate(raw), runtime().settings).answer(
        through_ledger
    )


def prepare_tool(spec: ToolCall, settings: WorkerSettings) -> Prepared:
    """The call of one attempt of one plan step: its envelope is the ledger's request."""
    key = calls.op_key(spec.run_id, spec.step_id, spec.attempt)
    envelope = build_envelope(
        run_id=spec.run_id,
        step_id=spec.step_id,
        op_key=key,
        attempt=spec.attempt,
        connector=spec.connector,
        arguments=spec.input,
        executor_policy=spec.executor_policy,
        narrowed=spec.narrowed,
        allowance=spec.allowance,
        opa=spec.opa,
        unsandboxed_shell=spec.unsandboxed_shell,
        unsandboxed_opencode=spec.unsandboxed_opencode,
    )

    def delivered() -> ExecutionEnvelope:
        workspace = settings.workspace_root / spec.run_id

        def prepare() -> None:
            workspace.mkdir(parents=True, exist_ok=True)
            if spec.opa is not None:  # the archive, in the workspace before the step runs
                unpack(settings, workspace, spec.opa)

        # Before the handler runs, nothing has taken effect: a full disk is waited out.
        wait_for_space(f"workspace of {spec.run_id}", prepare)
        return envelope.bound(workspace)

    def reconcile(_key: str) -> Performed | None:
        settled = opencode_handler.reconcile_turn(delivered())
        return None if settled is None else performed_of(check(delivered(), settled))

    def perform(_key: str) -> Performed:
        handlers = runtime().handlers or HANDLERS
        return performed_of(deliver(delivered(), handlers))

    def boundary(conn: Connection) -> JsonObject | None:
        at = spec.boundary or ""
        found = observe_cancel(conn, spec.run_id, at, settings.executor_id)
        return None if found is None else {"cancelled": found, "at": at}

    def settle(conn: Connection, result: JsonObject) -> JsonObject:
        record = spec.record
        if record is None or not settles_step(spec, result):
            return {}
        budgets = Spent.from_state(record.spent).view_after(result)
        arg: JsonObject = {
            "run_id": spec.run_id,
            "step_id": spec.step_id,
            "position": spec.position,
            "driver_kind": spec.driver_kind.value,
            "connector_id": record.connector_id,
            "outcome": result,
            "output_schema_ref": record.output_schema_ref,
            "budgets": budgets,
        }
        return {"recorded": write_step(conn, arg, settings.executor_id)}

    return Prepared(
        Call(
            run_id=spec.run_id,
            step_id=spec.step_id,
            attempt=spec.attempt,
            kind="tool",
            target=spec.driver_kind.value,
            request=envelope.model_dump(mode="json"),
            idempotent=_idempotent(spec.connector, spec.input),
            reconcile=reconcile if spec.driver_kind is DriverKind.OPENCODE else None,
            boundary=None if spec.boundary is None else boundary,
            settle=None if spec.record is None else settle,
        ),
        perform,
    )


def _idempotent(connector: Connector, step_input: JsonObject) -> bool:
    """May an interrupted call to this connector be sent again with the same key?

    MCP has no idempotency keys: only a tool the connector declares read-only
    may be sent again; any other interrupted MCP call is in doubt.
    """
    if connector.driver_kind is DriverKind.MCP_PROXY:
        tool = step_input.get("tool")
        return connector.mcp is not None and tool in connector.mcp.read_only_tools
    return connector.driver_kind in _IDEMPOTENT and connector.idempotency == "key"


@call_step("gatehouse.tool_call")
def tool_call(raw: JsonObject) -> JsonObject:
    return prepare_tool(ToolCall.model_validate(raw), runtime().settings).answer(through_ledger)
