"""What every route shares: its parameters and body read in checked order, its answer.

Bodies are read raw and checked in order — media type, size, JSON, schema,
model — so every bad input gets its own stable code and a 4xx. Query
parameters a route does not take are refused, and a route's parameters are
judged before its caller is (``refuse_bad_parameters``).

A refusal says what is wrong in words (``said``): the first problem in its
message, every problem in its details, and a value that is not a digest told
what a digest is instead of shown a regular expression.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import fastapi.routing
from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.routing import BaseRoute

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    strict_loads,
    validate_instance,
    with_placeholders,
)

__all__ = [
    "BODY_READ_TIMEOUT_S",
    "DIGEST_PATTERN",
    "MAX_JSON_DEPTH",
    "PLACEHOLDERS_HEADER",
    "Answer",
    "error_response",
    "media_type",
    "model_response",
    "parse_json",
    "problems",
    "read_body",
    "read_capped",
    "refuse_bad_parameters",
    "said",
    "served_routes",
]

M = TypeVar("M", bound=BaseModel)
# A body whose bytes stop coming (Content-Length promising more than is sent) is
# answered after this long instead of holding the connection.
BODY_READ_TIMEOUT_S = 10.0
MAX_JSON_DEPTH = 64
# A JSON escape can name half of a UTF-16 pair ("\ud800"): no text can hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The pattern of every digest the API takes (contracts' ``Digest``, the ``sha256`` and
# ``op_key`` path parameters): a SHA-256 in lowercase hex.
DIGEST_PATTERN = "^[0-9a-f]{64}$"
_HEX = frozenset("0123456789abcdef")
# Where a person finds the digest a field names, by the field's name.
_DIGEST_FOUND_IN = {
    "plan_digest": "the plan card's plan_digest",
    "previous_digest": "the plan_digest of the plan card edited",
    "op_key": "a call's op_key in the run's ledger",
    "sha256": "an artifact's sha256 in the run's artifacts",
}


# Set on an answer that carries placeholders: how many values it could not encode.
PLACEHOLDERS_HEADER = "Gatehouse-Placeholders"


class Answer(JSONResponse):
    """Every JSON answer of the API. A stored value no JSON can carry (a number
    stored as infinity before Gatehouse refused such numbers at the door) never
    turns a read into a 500: it is answered as a marked placeholder
    (``contracts.with_placeholders``), with the rest of the record, and the
    ``Gatehouse-Placeholders`` header says how many there are."""

    def __init__(self, content: object, status_code: int = 200, **kwargs: Any) -> None:
        self.placeholders = 0
        super().__init__(content, status_code, **kwargs)
        if self.placeholders:
            self.headers[PLACEHOLDERS_HEADER] = str(self.placeholders)

    def render(self, content: object) -> bytes:
        try:
            return super().render(content)
        except ValueError:  # "Out of range float values are not JSON compliant"
            shown, self.placeholders = with_placeholders(content)
            return super().render(shown)


def error_response(exc: GatehouseError) -> Answer:
    answer = Answer({"error": exc.to_json()}, status_code=exc.code.http_status)
    after = exc.details.get("retry_after_s")
    if isinstance(after, int) and exc.code.retryable:
        answer.headers["Retry-After"] = str(after)
    return answer


def model_response(model: BaseModel | list[BaseModel], status: int = 200) -> Answer:
    if isinstance(model, list):
        return Answer([m.model_dump(mode="json") for m in model], status_code=status)
    return Answer(model.model_dump(mode="json"), status_code=status)


def _depth(value: JsonValue) -> int:
    """How deeply arrays and objects nest (iteratively: no recursion to exhaust);
    ValueError for a string or key holding a lone UTF-16 surrogate."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str) and _LONE_SURROGATE.search(item):
            raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff)")
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
            if isinstance(item, dict):
                stack.extend((key, level) for key in item)
    return deepest


def _text(raw: bytes) -> str:
    """The body as JSON text, which RFC 8259 (§8.1) says is UTF-8 between systems, with
    no byte order mark; refused in plain words, not in Python's decoder's."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_JSON,
            f"the body is not UTF-8 (JSON text must be): the first bad byte is at offset"
            f" {exc.start}",
        ) from exc
    if text.startswith("\ufeff"):
        raise GatehouseError(
            ErrorCode.INVALID_JSON,
            "the body starts with a byte order mark (U+FEFF); JSON text must be UTF-8 without one",
        )
    # UTF-16 and UTF-32 text of ASCII characters is valid UTF-8, NUL bytes and all; JSON
    # text never holds a raw NUL (in a string it is escaped, \u0000).
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise GatehouseError(
            ErrorCode.INVALID_JSON,
            f"the body holds a NUL byte at offset {nul}, as UTF-16 and UTF-32 do; JSON text"
            " must be UTF-8",
        )
    return text


def parse_json(raw: bytes) -> JsonValue:
    """Strict JSON: UTF-8 only (Python's decoder would take UTF-16 and UTF-32 too), no
    NaN or Infinity (they are not JSON, and once stored they make every later answer
    about the record fail), no lone surrogate (no database can store it), at most
    ``MAX_JSON_DEPTH`` levels. NUL (``\\u0000``) is refused by the contracts in text
    fields; inside free-form JSON it is data, stored escaped."""
    text = _text(raw)
    try:
        data: JsonValue = strict_loads(text)
    except RecursionError as exc:
        raise GatehouseError(
            ErrorCode.JSON_TOO_DEEP, f"the body nests deeper than {MAX_JSON_DEPTH} levels"
        ) from exc
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_JSON, f"the body is not JSON: {exc}") from exc
    try:
        deepest = _depth(data)
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_JSON, f"the body is not JSON: {exc}") from exc
    if deepest > MAX_JSON_DEPTH:
        raise GatehouseError(
            ErrorCode.JSON_TOO_DEEP, f"the body nests deeper than {MAX_JSON_DEPTH} levels"
        )
    return data


def _digest_problem(field: str, value: str) -> str:
    """Why ``value`` is not a digest, and what one is: for a person who typed or copied
    one, in place of the pattern it breaks."""
    if len(value) != 64:
        why = f"{len(value)} characters"
    else:
        at = next((i for i, c in enumerate(value) if c not in _HEX), 0)
        why = f"character {at + 1} is {value[at]!r}"
    found = _DIGEST_FOUND_IN.get(field)
    where = f", as {found} is" if found else ""
    return f"not a digest ({why}): a digest is 64 lowercase hex characters (0-9, a-f){where}"


def said(details: JsonObject) -> str:
    """A refusal's message from its details' ``errors``: the first problem, and how many
    more the details name."""
    errors = details.get("errors")
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return "the request breaks a rule of its contract"
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{first.get('path')}: {first.get('problem')}{more}"


def problems(exc: ValidationError | RequestValidationError) -> JsonObject:
    """A validation error as an answer's details: each failing path and why (20 at most).
    Takes pydantic's errors and FastAPI's (a route's parameters), which are the same."""
    found: list[JsonValue] = [_problem(e) for e in exc.errors()[:20]]
    return {"errors": found}


def _problem(error: Mapping[str, Any]) -> JsonObject:
    loc: Sequence[object] = error.get("loc", ())
    path = "/" + "/".join(str(p) for p in loc)
    value, ctx = error.get("input"), error.get("ctx") or {}
    if (
        error.get("type") == "string_pattern_mismatch"
        and ctx.get("pattern") == DIGEST_PATTERN
        and isinstance(value, str)
    ):
        return {"path": path, "problem": _digest_problem(str(loc[-1]) if loc else "", value)}
    return {"path": path, "problem": str(error.get("msg"))}


def _schema_checked(schema: str, data: JsonValue) -> None:
    """``validate_instance``, its refusal said in words (``said``): jsonschema states a
    broken pattern as ``'abc' does not match '^[0-9a-f]{64}$'``, which tells a person
    with a short digest nothing; a digest's problem is restated (``_digest_problem``)."""
    try:
        validate_instance(schema, data, ErrorCode.INVALID_REQUEST)
    except GatehouseError as exc:
        errors = exc.details.get("errors")
        if not isinstance(errors, list):
            raise
        restated: list[JsonValue] = [_restated(e, data) for e in errors]
        details: JsonObject = {**exc.details, "errors": restated}
        raise GatehouseError(exc.code, said(details), details) from exc


def _restated(error: JsonValue, data: JsonValue) -> JsonValue:
    if not isinstance(error, dict):
        return error
    path = error.get("path")
    if not isinstance(path, str):
        return error
    value = _at(data, path)
    # only a value that broke the digest pattern (the refusal names the rule it broke)
    if isinstance(value, str) and error.get("pattern") == DIGEST_PATTERN:
        return {**error, "problem": _digest_problem(path.rsplit("/", 1)[-1], value)}
    return error


def _at(data: JsonValue, path: str) -> JsonValue:
    """The value at a problem's path (``/steps/0/input``), or None where it names none
    (a key holding ``/`` cannot be told apart: its problem stays as stated)."""
    node = data
    for part in path.split("/")[1:] if path != "/" else []:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_body(request: Request, limit: int, schema: str, model: type[M]) -> M:
    media = media_type(request)
    if media != "application/json":
        raise GatehouseError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "send the body as application/json",
            {"content_type": media},
        )
    try:
        raw = await asyncio.wait_for(request.body(), timeout=BODY_READ_TIMEOUT_S)
    except TimeoutError as exc:
        raise GatehouseError(
            ErrorCode.BODY_TIMEOUT,
            f"the body did not arrive within {BODY_READ_TIMEOUT_S:.0f} s",
        ) from exc
    if len(raw) > limit:
        raise GatehouseError(
            ErrorCode.PAYLOAD_TOO_LARGE, f"the body is {len(raw)} bytes; the limit is {limit}"
        )
    data = parse_json(raw)
    _schema_checked(schema, data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = problems(exc)
        raise GatehouseError(ErrorCode.INVALID_REQUEST, said(details), details) from exc


async def read_capped(request: Request, limit: int) -> bytes:
    """An archive's raw body (not JSON: no parsing, no schema), refused as soon as it passes
    ``limit`` bytes, whatever its headers say."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(len(body), limit, at_least=True)
    return bytes(body)


def _too_large(size: int, limit: int, *, at_least: bool = False) -> GatehouseError:
    size_text = f"at least {size}" if at_least else str(size)
    return GatehouseError(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the archive is {size_text} bytes; the limit is {limit} (GATEHOUSE_MAX_ARCHIVE_BYTES)",
        {"limit": limit},
    )


_PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


async def known_query(request: Request) -> None:
    """Refuse query parameters an API route does not take (an app-wide dependency): a
    misspelt ``limt=5`` is an error the caller hears about, not a silent default.
    Not checked: the dashboard's pages (browsers add what they like) and the probes
    (load balancers and scrapers add cache-busting parameters). ``async`` though it
    awaits nothing: FastAPI would run a plain function in a thread, for every request."""
    if not request.query_params:
        return
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or route.path.startswith("/dashboard"):
        return
    if route.path in _PROBES:
        return
    taken: set[str] = set()
    stack: list[Dependant] = [route.dependant]
    while stack:
        dependant = stack.pop()
        taken.update(p.alias for p in dependant.query_params)
        stack.extend(dependant.dependencies)
    unknown = sorted(set(request.query_params) - taken)
    if unknown:
        shown = ", ".join(repr(u[:40]) for u in unknown[:5])
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            f"unknown query parameter(s) {shown}; this route takes"
            f" {', '.join(sorted(taken)) or 'none'}",
            {"unknown": list[JsonValue](unknown[:20])},
        )


def refuse_bad_parameters(request: Request) -> None:
    """Refuse the request's path, query, header and cookie parameters as FastAPI would.

    FastAPI validates a route's own parameters after its dependencies, and the caller
    is a dependency: called first, so a malformed request is answered as malformed
    (``invalid_request``) whoever sends it, never as a refused caller first."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    d = route.dependant
    errors: list[object] = []
    for fields, given in (
        (d.path_params, request.path_params),
        (d.query_params, request.query_params),
        (d.header_params, request.headers),
        (d.cookie_params, request.cookies),
    ):
        errors += request_params_to_args(fields, given)[1]
    if errors:
        raise RequestValidationError(errors)


def served_routes(app: FastAPI) -> list[BaseRoute]:
    """Every route ``app`` serves, one per path operation, in the order they match.

    FastAPI 0.137.2 and later keep an included router whole in ``app.routes`` and
    list its routes through ``iter_route_contexts``; earlier versions copy them into
    ``app.routes``. The shim includes its routers without a prefix, so a route's own
    path is the path it serves."""
    expand = getattr(fastapi.routing, "iter_route_contexts", None)
    if expand is None:
        return list(app.routes)
    return [context.original_route for context in expand(app.routes)]
