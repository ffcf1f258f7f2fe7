"""The planners: what turns an objective into a proposed plan.

A recipe's template compiles in ``policies.templates``; the planners here ask
a model. Each builds its request deterministically (its digest is what the
ledger records) and only proposes: the plan it returns is gated like any other.

* ``_chat`` — one chat-completions call to an OpenAI-compatible API, and the
  checks every answer gets (size, JSON object, no execution results);
* ``_openai_compat`` — the model planner: prompt, request body, plan and usage;
* ``_opencode`` — the compile turn of the OpenCode planner.
"""

from worker.planners._chat import (
    MAX_RESPONSE_BYTES,
    ErrorFactory,
    ModelSettings,
    chat,
    content_of,
    excerpt,
    json_object_of,
)
from worker.planners._openai_compat import (
    ANSWER_RULE,
    PlannerInput,
    plan_and_usage,
    plan_with_model,
    planner_prompt,
    request_body,
    usage_from,
)
from worker.planners._opencode import CompileTurn, compile_request

__all__ = [
    "ANSWER_RULE",
    "MAX_RESPONSE_BYTES",
    "CompileTurn",
    "ErrorFactory",
    "ModelSettings",
    "PlannerInput",
    "chat",
    "compile_request",
    "content_of",
    "excerpt",
    "json_object_of",
    "plan_and_usage",
    "plan_with_model",
    "planner_prompt",
    "request_body",
    "usage_from",
]
