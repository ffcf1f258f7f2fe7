"""What every route shares: its parameters and body read in checked order, its answer.

Bodies are read raw and checked in order — media type, size, JSON, schema,
model — so every bad input gets its own stable code and a 4xx. Query
parameters a route does not take are refused, and a route's parameters are
judged before its caller is (``refuse_bad_parameters``).
"""

from __future__ import annotations

import asyncio
import re
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
    "served_routes",
]

M = TypeVar("M", bound=BaseModel)
# A body whose bytes stop coming (Content-Length promising more than is sent) is
# answered after this long instead of holding the connection.
BODY_READ_TIMEOUT_S = 10.0
MAX_JSON_DEPTH = 64
# A JSON escape can name half of a UTF-16 pair ("\ud800"): no text can hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def parse_json(raw: bytes) -> JsonValue:
    """Strict JSON: UTF-8 only (Python's decoder would take UTF-16 and UTF-32 too), no
    NaN or Infinity (they are not JSON, and once stored they make every later answer
    about the record fail), no lone surrogate (no database can store it), at most
    ``MAX_JSON_DEPTH`` levels. NUL (``\\u0000``) is refused by the contracts in text
    fields; inside free-form JSON it is data, stored escaped."""
    try:
        data: JsonValue = strict_loads(raw.decode("utf-8"))
    except RecursionError as exc:
        raise GatehouseError(
            ErrorCode.JSON_TOO_DEEP, f"the body nests deeper than {MAX_JSON_DEPTH} levels"
        ) from exc
    except ValueError as exc:  # includes UnicodeDecodeError
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


def problems(exc: ValidationError) -> JsonObject:
    """A validation error as an answer's details: each failing path and why (20 at most)."""
    return {
        "errors": [
            {"path": "/" + "/".join(str(p) for p in e["loc"]), "problem": e["msg"]}
            for e in exc.errors()[:20]
        ]
    }


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
    validate_instance(schema, data, ErrorCode.INVALID_REQUEST)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, "the body breaks a rule of its contract", problems(exc)
        ) from exc


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
