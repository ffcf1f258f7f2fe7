"""A planner call of a run (its compile, or a repair), ready for the ledger.

``prepare_planner`` builds the call's request exactly as it is recorded (its
digest is the ledger's request digest) and what performs it: a recipe's
template, a model behind an OpenAI-compatible API, or an OpenCode turn. The
live worker sends it through the ledger; a replay builds the same request and
reads the recorded answer.
"""

from __future__ import annotations

from collections.abc import Callable

from contracts import (
    COMPILE_STEP_ID,
    ErrorCode,
    GatehouseError,
    JsonObject,
    PlannerCall,
    digest_of,
)
from contracts.recipe import Recipe
from policies import catalog
from policies.templates import compile_template
from worker.calls._ledger import Call, Performed, Prepared, performed, refusal, settled
from worker.planners import (
    CompileTurn,
    ModelSettings,
    PlannerInput,
    compile_request,
    plan_and_usage,
    request_body,
)
from worker.runtime import WorkerSettings

__all__ = ["COMPILE_STEP_ID", "PlannerCall", "prepare_planner"]


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
                return performed(turn.run(key))
            except GatehouseError as exc:
                return refusal(exc)

        def reconcile_opencode(key: str) -> Performed | None:
            return settled(turn.reconcile(key))

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
