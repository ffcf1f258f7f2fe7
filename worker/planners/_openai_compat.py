"""An OpenAI-compatible chat planner: the model *proposes* a plan, nothing more.

Why it looks the way it does:

* ``request_body`` is a pure function of its inputs and always spells the same
  bytes (canonical JSON), because its digest is written to the ledger: a
  recovered workflow must be able to prove it asked the same question.
* ``plan_with_model`` sends it through the shared transport (``chat``), which
  translates every foreign failure (transport, timeout, status, malformed
  answer) once; here each becomes ``GatehouseError(PLANNER_FAILED)``.
* It returns the proposed plan as a plain JSON object and does *not* validate
  it: the plan gate owns validation, and a planner that validated its own
  output would be a second, divergent gate.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    canonical_json,
    render_schema,
)
from contracts.plan import PLAN_SCHEMA_ID
from contracts.recipe import Recipe
from contracts.tool_pool import Connector, ToolPool
from worker.planners._chat import ModelSettings, chat, json_object_of

__all__ = [
    "ANSWER_RULE",
    "ModelSettings",
    "PlannerInput",
    "plan_and_usage",
    "plan_with_model",
    "planner_prompt",
    "request_body",
    "usage_from",
]

# The last line of the system message: the model answers with a plan, never with
# what running it would produce (the gate refuses plans that carry results).
ANSWER_RULE = "Answer with one JSON object matching the schema; never include execution results."


@dataclass(frozen=True)
class PlannerInput:
    """Everything the model is shown; nothing else reaches the prompt."""

    objective: str
    parameters: JsonObject
    recipe: Recipe  # recipe.model_prompt is the task text (may be None)
    tool_pool: ToolPool  # the connectors the plan may use
    instruction: str  # guardrail text (channel model_instruction)
    max_tokens: int = 4096  # the profile's budget for one compile
    seed: int | None = None  # from the run's RANDOM_SEED: same seed, same request
    # A repair (policies/repair.py): the refused or failing plan and why
    # (channel model_instruction); None for the first compile.
    repair: JsonObject | None = None


def _describe_connector(connector: Connector) -> JsonObject:
    """What a model needs to pick a connector, and no more (limits stay private)."""
    out: JsonObject = {
        "connector_id": connector.connector_id,
        "driver_kind": connector.driver_kind.value,
        "description": connector.description,
    }
    if connector.destinations:
        out["destinations"] = [
            {
                "scheme": d.scheme,
                "host": d.host,
                "ports": list(d.ports) if d.ports is not None else None,
                "path_prefix": d.path_prefix,
            }
            for d in connector.destinations
        ]
    if connector.commands:
        out["commands"] = [
            {"name": c.name, "allowed_flags": list(c.allowed_flags), "max_args": c.max_args}
            for c in connector.commands
        ]
    return out


def _system_message(planner_input: PlannerInput) -> str:
    pool = planner_input.tool_pool
    connectors: list[JsonValue] = [_describe_connector(c) for c in pool.connectors]
    return "\n\n".join(
        [
            planner_input.instruction,
            f"Tool pool {pool.tool_pool_id} (version {pool.version}). "
            "Every step must name one of these connectors and its driver_kind "
            "(JSON):\n" + canonical_json(connectors),
            ANSWER_RULE,
        ]
    )


def _user_message(planner_input: PlannerInput) -> str:
    parts: list[str] = []
    if planner_input.recipe.model_prompt is not None:
        parts.append(planner_input.recipe.model_prompt)
    parts.append(f"Objective: {planner_input.objective}")
    parts.append("Parameters (JSON): " + canonical_json(planner_input.parameters))
    if planner_input.repair is not None:
        parts.append(_repair_message(planner_input.repair))
    return "\n\n".join(parts)


def _repair_message(repair: JsonObject) -> str:
    """What a repair call adds to the request: the plan, and what is wrong with it."""
    if repair.get("reason") == "step_failed":
        ask = (
            "Repair: a step of the approved plan below failed. Answer with the whole plan:"
            " the steps listed as done, unchanged and first, then a new remainder that"
            " reaches the objective another way."
        )
    else:
        ask = (
            "Repair: the plan below was refused for the problems listed. Answer with the"
            " whole corrected plan."
        )
    return ask + "\nRepair context (JSON): " + canonical_json(repair)


def planner_prompt(planner_input: PlannerInput) -> tuple[str, str]:
    """(system, user): the planner's instruction and its request, for any model planner."""
    return _system_message(planner_input), _user_message(planner_input)


def request_body(settings: ModelSettings, planner_input: PlannerInput) -> JsonObject:
    """The chat-completions request, deterministic so its digest can be ledgered.

    Every free-form value embedded in a message is canonical JSON, and the body
    is sent as ``canonical_json(request_body(...))``: equal inputs give equal bytes.
    """
    body: JsonObject = {
        "model": settings.model,
        "temperature": 0,
        "max_tokens": planner_input.max_tokens,
        "stream": False,
        "messages": [
            {"role": "system", "content": _system_message(planner_input)},
            {"role": "user", "content": _user_message(planner_input)},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "mova_agent_plan_v1",
                "strict": True,
                "schema": render_schema(PLAN_SCHEMA_ID),
            },
        },
    }
    if planner_input.seed is not None:
        body["seed"] = planner_input.seed
    return body


def _fail(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(ErrorCode.PLANNER_FAILED, message, details)


def usage_from(completion: object, model: str) -> JsonObject:
    """The usage a completion reports, as the budgets count it: ``{model,
    prompt_tokens, completion_tokens}`` (zeros when the provider reported none)."""
    usage = completion.get("usage") if isinstance(completion, dict) else None
    reported = completion.get("model") if isinstance(completion, dict) else None

    def count(name: str) -> int:
        value = usage.get(name) if isinstance(usage, dict) else None
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if ok and isinstance(value, int) else 0

    return {
        "model": reported if isinstance(reported, str) and reported else model,
        "prompt_tokens": count("prompt_tokens"),
        "completion_tokens": count("completion_tokens"),
    }


def plan_with_model(
    settings: ModelSettings, planner_input: PlannerInput, idempotency_key: str
) -> JsonObject:
    """Ask the model for a plan and return it as a JSON object, unvalidated."""
    return plan_and_usage(settings, planner_input, idempotency_key)[0]


def plan_and_usage(
    settings: ModelSettings, planner_input: PlannerInput, idempotency_key: str
) -> tuple[JsonObject, JsonObject]:
    """Ask the model for a plan: (the plan as a JSON object, unvalidated; its usage).

    Every failure raises PLANNER_FAILED, which is retryable: models and their
    gateways fail transiently.
    """
    body = canonical_json(request_body(settings, planner_input)).encode("utf-8")
    completion, status, raw = chat(
        settings, body, idempotency_key, "planner", unavailable=_fail, invalid=_fail
    )
    plan = json_object_of(completion, status, raw, "planner", _fail)
    return plan, usage_from(completion, settings.model)
