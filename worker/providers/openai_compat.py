"""An OpenAI-compatible chat planner: the model *proposes* a plan, nothing more.

Why it looks the way it does:

* ``request_body`` is a pure function of its inputs and always spells the same
  bytes (canonical JSON), because its digest is written to the ledger: a
  recovered workflow must be able to prove it asked the same question.
* ``plan_with_model`` is the one boundary where httpx meets Gatehouse, so every
  foreign failure (transport, timeout, status, malformed answer) is translated
  here, once, into ``GatehouseError(PLANNER_FAILED)``. Callers never see httpx.
* It returns the proposed plan as a plain JSON object and does *not* validate
  it: the plan gate owns validation, and a planner that validated its own
  output would be a second, divergent gate.
* The client ignores proxy environment variables and never follows redirects,
  so the planner endpoint is exactly the configured one.
* The explain skill (``worker/explain.py``) asks the same endpoint for a report
  through ``explain_request_body`` / ``explain_with_model``: same transport,
  its own error codes (``explain_unavailable``, ``explain_invalid``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import httpx

from contracts._errors import ErrorCode, GatehouseError
from contracts._json import JsonObject, JsonValue, canonical_json
from contracts._schemas import render_schema
from contracts.explain import EXPLAIN_REPORT_SCHEMA_ID
from contracts.plan import PLAN_SCHEMA_ID
from contracts.recipe import Recipe
from contracts.tool_pool import Connector, ToolPool

__all__ = [
    "ANSWER_RULE",
    "EXPLAIN_MAX_TOKENS",
    "MAX_RESPONSE_BYTES",
    "ModelSettings",
    "PlannerInput",
    "explain_request_body",
    "explain_with_model",
    "plan_and_usage",
    "plan_with_model",
    "request_body",
    "usage_from",
]

# The last line of the system message: the model answers with a plan, never with
# what running it would produce (the gate refuses plans that carry results).
ANSWER_RULE = "Answer with one JSON object matching the schema; never include execution results."

# A plan is small; an endpoint that streams megabytes at us is broken or hostile,
# and reading it all would hold the worker's memory hostage.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024

_EXCERPT_CHARS = 500

# ```json\n{...}\n```  (the language tag is optional; surrounding whitespace ignored)
_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```$", re.DOTALL)


@dataclass(frozen=True)
class ModelSettings:
    """Where the planner lives. ``base_url`` ends in the API root, e.g. ``.../v1``."""

    base_url: str
    model: str
    api_key: str | None
    timeout_s: float = 60.0


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


def _excerpt(data: bytes | str) -> str:
    """At most 500 characters: enough to diagnose, too little to flood the ledger."""
    if isinstance(data, bytes):
        # A UTF-8 character is at most 4 bytes: decode only what the excerpt can use.
        data = data[: 4 * _EXCERPT_CHARS].decode("utf-8", errors="replace")
    return data[:_EXCERPT_CHARS]


def _fail(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(ErrorCode.PLANNER_FAILED, message, details)


def _reject_constant(name: str) -> NoReturn:
    # NaN and Infinity are not JSON; PostgreSQL jsonb and canonical_json refuse them.
    raise ValueError(f"{name} is not a JSON value")


def _loads(text: str | bytes) -> object:
    """``json.loads`` that refuses NaN/Infinity; raises ValueError on any bad input."""
    parsed: object = json.loads(text, parse_constant=_reject_constant)
    return parsed


def _strip_fences(content: str) -> str:
    """Models often wrap JSON in a Markdown fence despite response_format; unwrap it."""
    stripped = content.strip()
    match = _FENCE.match(stripped)
    return match.group("body").strip() if match else stripped


def _post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    """POST and read at most MAX_RESPONSE_BYTES (+1, to notice an oversized answer)."""
    with (
        httpx.Client(trust_env=False, follow_redirects=False, timeout=timeout_s) as client,
        client.stream("POST", url, content=body, headers=headers) as response,
    ):
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                break
        return response.status_code, b"".join(chunks)


def _content_of(
    completion: object,
    status: int,
    raw: bytes,
    fail: Callable[[str, JsonObject], GatehouseError] = _fail,
) -> str:
    """``choices[0].message.content``, or ``fail`` (PLANNER_FAILED) saying which part is missing."""
    details: JsonObject = {"status": status, "body_excerpt": _excerpt(raw)}
    if not isinstance(completion, dict):
        raise fail("the planner's response is not a JSON object", details)
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        raise fail("the planner's response has no choices", details)
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise fail("the planner's first choice has no message", details)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal")
        if isinstance(refusal, str):
            details["refusal"] = _excerpt(refusal)
        finish_reason = first.get("finish_reason")
        if isinstance(finish_reason, str):
            details["finish_reason"] = finish_reason
        raise fail("the planner's message has no text content", details)
    return content


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


ErrorFactory = Callable[[str, JsonObject], GatehouseError]


def _chat(
    settings: ModelSettings,
    body: bytes,
    idempotency_key: str,
    who: str,
    *,
    unavailable: ErrorFactory,
    invalid: ErrorFactory,
) -> tuple[object, int, bytes]:
    """POST one chat completion; (the parsed completion, HTTP status, raw body).

    ``unavailable`` words what says the model was not there (a timeout, no
    connection, an HTTP error), ``invalid`` what it answered that is no answer
    (too large, not JSON); ``who`` names the model in messages."""
    url = settings.base_url.rstrip("/") + "/chat/completions"
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "Idempotency-Key": idempotency_key,
    }
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    try:
        status, raw = _post(url, body, headers, settings.timeout_s)
    except httpx.TimeoutException as exc:
        raise unavailable(
            f"the {who} did not answer within {settings.timeout_s}s",
            {"error": type(exc).__name__, "timeout_s": settings.timeout_s},
        ) from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise unavailable(
            f"the {who} could not be reached",
            {"error": type(exc).__name__, "reason": _excerpt(str(exc))},
        ) from exc
    details: JsonObject = {"status": status, "body_excerpt": _excerpt(raw)}
    if len(raw) > MAX_RESPONSE_BYTES:
        raise invalid(f"the {who}'s response exceeds {MAX_RESPONSE_BYTES} bytes", details)
    if not 200 <= status < 300:
        raise unavailable(f"the {who} answered HTTP {status}", details)
    try:
        completion = _loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise invalid(f"the {who}'s response is not JSON", details) from exc
    return completion, status, raw


def plan_and_usage(
    settings: ModelSettings, planner_input: PlannerInput, idempotency_key: str
) -> tuple[JsonObject, JsonObject]:
    """Ask the model for a plan: (the plan as a JSON object, unvalidated; its usage).

    The Idempotency-Key lets a compliant endpoint answer a retried call (after a
    worker crash) with its first answer. Every failure raises PLANNER_FAILED,
    which is retryable: models and their gateways fail transiently.
    """
    body = canonical_json(request_body(settings, planner_input)).encode("utf-8")
    completion, status, raw = _chat(
        settings, body, idempotency_key, "planner", unavailable=_fail, invalid=_fail
    )
    content = _content_of(completion, status, raw)
    details: JsonObject = {"status": status, "content_excerpt": _excerpt(content)}
    try:
        plan = _loads(_strip_fences(content))
    except ValueError as exc:
        raise _fail("the planner's content is not JSON", details) from exc
    if not isinstance(plan, dict):
        raise _fail("the planner's content is not a JSON object", details)
    return plan, usage_from(completion, settings.model)


# ---------------------------------------------------------------- the explain skill

# A report is a few paragraphs; the budget of one explain turn.
EXPLAIN_MAX_TOKENS = 1024


def explain_request_body(
    settings: ModelSettings, system: str, user: str, seed: int | None
) -> JsonObject:
    """The chat-completions request of one explain, deterministic like ``request_body``:
    its digest is what the ledger uses to tell the same question from another."""
    body: JsonObject = {
        "model": settings.model,
        "temperature": 0,
        "max_tokens": EXPLAIN_MAX_TOKENS,
        "stream": False,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "gatehouse_explain_report_v1",
                "strict": True,
                "schema": render_schema(EXPLAIN_REPORT_SCHEMA_ID),
            },
        },
    }
    if seed is not None:
        body["seed"] = seed
    return body


# The shared helpers (``_content_of``) word their messages for the planner; an
# explain's error names the model instead.
def _unavailable(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(
        ErrorCode.EXPLAIN_UNAVAILABLE, message.replace("planner", "model"), details
    )


def _invalid(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(ErrorCode.EXPLAIN_INVALID, message.replace("planner", "model"), details)


def explain_with_model(
    settings: ModelSettings, body: JsonObject, idempotency_key: str
) -> JsonObject:
    """Send one explain request; return the model's answer as a JSON object, unvalidated.

    A model that cannot be reached, times out or answers an HTTP error is
    EXPLAIN_UNAVAILABLE; an answer that is not a JSON object is EXPLAIN_INVALID
    (the caller checks it against the report schema, with the same code).
    """
    sent = canonical_json(body).encode("utf-8")
    completion, status, raw = _chat(
        settings, sent, idempotency_key, "model", unavailable=_unavailable, invalid=_invalid
    )
    content = _content_of(completion, status, raw, _invalid)
    details: JsonObject = {"status": status, "content_excerpt": _excerpt(content)}
    try:
        answer = _loads(_strip_fences(content))
    except ValueError as exc:
        raise _invalid("the model's content is not JSON", details) from exc
    if not isinstance(answer, dict):
        raise _invalid("the model's content is not a JSON object", details)
    return answer
