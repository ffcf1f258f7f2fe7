"""The explain skill's model call: one report about a finished run.

The same endpoint and transport as the planner (``chat``), its own request and
its own error codes: a model that cannot be reached, times out or answers an
HTTP error is ``explain_unavailable``; an answer that is not a JSON object is
``explain_invalid`` (``worker/explain/_skill.py`` checks it against the report schema,
with the same code).
"""

from __future__ import annotations

from contracts import ErrorCode, GatehouseError, JsonObject, canonical_json, render_schema
from contracts.explain import EXPLAIN_REPORT_SCHEMA_ID
from worker.planners import ModelSettings, chat, json_object_of

__all__ = ["EXPLAIN_MAX_TOKENS", "explain_request_body", "explain_with_model"]

# A report is a few paragraphs; the budget of one explain turn.
EXPLAIN_MAX_TOKENS = 1024


def explain_request_body(
    settings: ModelSettings, system: str, user: str, seed: int | None
) -> JsonObject:
    """The chat-completions request of one explain, deterministic like the planner's
    ``request_body``: its digest is what the ledger uses to tell the same question
    from another."""
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


def _unavailable(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(ErrorCode.EXPLAIN_UNAVAILABLE, message, details)


def _invalid(message: str, details: JsonObject) -> GatehouseError:
    return GatehouseError(ErrorCode.EXPLAIN_INVALID, message, details)


def explain_with_model(
    settings: ModelSettings, body: JsonObject, idempotency_key: str
) -> JsonObject:
    """Send one explain request; return the model's answer as a JSON object, unvalidated."""
    sent = canonical_json(body).encode("utf-8")
    completion, status, raw = chat(
        settings, sent, idempotency_key, "model", unavailable=_unavailable, invalid=_invalid
    )
    return json_object_of(completion, status, raw, "model", _invalid)
