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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NoReturn

import httpx

from contracts._errors import ErrorCode, GatehouseError
from contracts._json import JsonObject, JsonValue, canonical_json
from contracts._schemas import render_schema
from contracts.plan import PLAN_SCHEMA_ID
from contracts.recipe import Recipe
from contracts.tool_pool import Connector, ToolPool

__all__ = [
    "ANSWER_RULE",
    "MAX_RESPONSE_BYTES",
    "ModelSettings",
    "PlannerInput",
    "plan_with_model",
    "request_body",
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
    return "\n\n".join(parts)


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


def _content_of(completion: object, status: int, raw: bytes) -> str:
    """``choices[0].message.content``, or PLANNER_FAILED saying which part is missing."""
    details: JsonObject = {"status": status, "body_excerpt": _excerpt(raw)}
    if not isinstance(completion, dict):
        raise _fail("the planner's response is not a JSON object", details)
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _fail("the planner's response has no choices", details)
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise _fail("the planner's first choice has no message", details)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal")
        if isinstance(refusal, str):
            details["refusal"] = _excerpt(refusal)
        finish_reason = first.get("finish_reason")
        if isinstance(finish_reason, str):
            details["finish_reason"] = finish_reason
        raise _fail("the planner's message has no text content", details)
    return content


def plan_with_model(
    settings: ModelSettings, planner_input: PlannerInput, idempotency_key: str
) -> JsonObject:
    """Ask the model for a plan and return it as a JSON object, unvalidated.

    The Idempotency-Key lets a compliant endpoint answer a retried call (after a
    worker crash) with its first answer. Every failure raises PLANNER_FAILED,
    which is retryable: models and their gateways fail transiently.
    """
    url = settings.base_url.rstrip("/") + "/chat/completions"
    body = canonical_json(request_body(settings, planner_input)).encode("utf-8")
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
        raise _fail(
            f"the planner did not answer within {settings.timeout_s}s",
            {"error": type(exc).__name__, "timeout_s": settings.timeout_s},
        ) from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise _fail(
            "the planner could not be reached",
            {"error": type(exc).__name__, "reason": _excerpt(str(exc))},
        ) from exc

    if len(raw) > MAX_RESPONSE_BYTES:
        raise _fail(
            f"the planner's response exceeds {MAX_RESPONSE_BYTES} bytes",
            {"status": status, "body_excerpt": _excerpt(raw)},
        )
    if not 200 <= status < 300:
        raise _fail(
            f"the planner answered HTTP {status}",
            {"status": status, "body_excerpt": _excerpt(raw)},
        )
    try:
        completion = _loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _fail(
            "the planner's response is not JSON",
            {"status": status, "body_excerpt": _excerpt(raw)},
        ) from exc

    content = _content_of(completion, status, raw)
    details: JsonObject = {"status": status, "content_excerpt": _excerpt(content)}
    try:
        plan = _loads(_strip_fences(content))
    except ValueError as exc:
        raise _fail("the planner's content is not JSON", details) from exc
    if not isinstance(plan, dict):
        raise _fail("the planner's content is not a JSON object", details)
    return plan
