"""One chat completion from an OpenAI-compatible endpoint: the transport the
planner (``openai_compat``) and the explain skill (``explain_model``) share.

* ``chat`` is the one place httpx meets Gatehouse for a model: every foreign
  failure (transport, timeout, status, an answer too large or not JSON) is
  translated here, once, into the caller's own error codes (``unavailable`` /
  ``invalid``). Callers never see httpx.
* The client ignores proxy environment variables and never follows redirects,
  so the endpoint is exactly the configured one.
* At most ``MAX_RESPONSE_BYTES`` are read: an endpoint that streams megabytes
  at us is broken or hostile, and reading it all would hold the worker's memory
  hostage.
* ``json_object_of`` takes the answer's text (``choices[0].message.content``),
  unwraps a Markdown fence, and parses it as one JSON object, refusing NaN and
  infinities (PostgreSQL ``jsonb`` and ``canonical_json`` refuse them too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from contracts import GatehouseError, JsonObject, strict_loads

__all__ = [
    "MAX_RESPONSE_BYTES",
    "ErrorFactory",
    "ModelSettings",
    "chat",
    "content_of",
    "excerpt",
    "json_object_of",
]

# A plan or a report is small; see the module's docstring.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024

_EXCERPT_CHARS = 500

# ```json\n{...}\n```  (the language tag is optional; surrounding whitespace ignored)
_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```$", re.DOTALL)

# Words a failure as the caller's error: (message, details) -> GatehouseError.
ErrorFactory = Callable[[str, JsonObject], GatehouseError]


@dataclass(frozen=True)
class ModelSettings:
    """Where the model lives. ``base_url`` ends in the API root, e.g. ``.../v1``."""

    base_url: str
    model: str
    api_key: str | None
    timeout_s: float = 60.0


def excerpt(data: bytes | str) -> str:
    """At most 500 characters: enough to diagnose, too little to flood the ledger."""
    if isinstance(data, bytes):
        # A UTF-8 character is at most 4 bytes: decode only what the excerpt can use.
        data = data[: 4 * _EXCERPT_CHARS].decode("utf-8", errors="replace")
    return data[:_EXCERPT_CHARS]


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


def chat(
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
    (too large, not JSON); ``who`` names the model in messages. The
    ``Idempotency-Key`` lets a compliant endpoint answer a call retried after a
    worker crash with its first answer."""
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
            {"error": type(exc).__name__, "reason": excerpt(str(exc))},
        ) from exc
    details: JsonObject = {"status": status, "body_excerpt": excerpt(raw)}
    if len(raw) > MAX_RESPONSE_BYTES:
        raise invalid(f"the {who}'s response exceeds {MAX_RESPONSE_BYTES} bytes", details)
    if not 200 <= status < 300:
        raise unavailable(f"the {who} answered HTTP {status}", details)
    try:
        completion = strict_loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise invalid(f"the {who}'s response is not JSON", details) from exc
    return completion, status, raw


def content_of(completion: object, status: int, raw: bytes, who: str, fail: ErrorFactory) -> str:
    """``choices[0].message.content``, or ``fail`` saying which part is missing."""
    details: JsonObject = {"status": status, "body_excerpt": excerpt(raw)}
    if not isinstance(completion, dict):
        raise fail(f"the {who}'s response is not a JSON object", details)
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        raise fail(f"the {who}'s response has no choices", details)
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise fail(f"the {who}'s first choice has no message", details)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal")
        if isinstance(refusal, str):
            details["refusal"] = excerpt(refusal)
        finish_reason = first.get("finish_reason")
        if isinstance(finish_reason, str):
            details["finish_reason"] = finish_reason
        raise fail(f"the {who}'s message has no text content", details)
    return content


def json_object_of(
    completion: object, status: int, raw: bytes, who: str, fail: ErrorFactory
) -> JsonObject:
    """The answer's text parsed as one JSON object (a Markdown fence unwrapped), or
    ``fail``. Not validated against any schema: that is the caller's gate."""
    content = content_of(completion, status, raw, who, fail)
    details: JsonObject = {"status": status, "content_excerpt": excerpt(content)}
    try:
        answer = strict_loads(_strip_fences(content))
    except ValueError as exc:
        raise fail(f"the {who}'s content is not JSON", details) from exc
    if not isinstance(answer, dict):
        raise fail(f"the {who}'s content is not a JSON object", details)
    return answer
