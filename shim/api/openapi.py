"""The served OpenAPI document, told the truth.

The routes read their bodies themselves (``read_body``: size, time, depth and
NaN limits before pydantic), so FastAPI alone would document no request body,
every answer as ``{}`` and its own 422 shape. Each route says what it takes and
answers where it is routed (``@documented(Op(...))`` under its ``@router``
line): the request body (the pydantic model the route validates with, or the
archive media types), the success answer (the model the route returns), and
every error status the route can answer. This module keeps what every route
shares: each error status as the envelope ``{"error": {code, message,
retryable, details}}`` with the codes that status carries, the statuses every
route or every body can answer, and the links between answers. Schemas come from
the same pydantic models the code uses. The dashboard's HTML pages are for
browsers and left out; a route of the API with no ``Op`` stops the app at its
first ask for the document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from contracts import ErrorCode, JsonObject
from policies import catalog

__all__ = [
    "BODY",
    "OBJECT",
    "TEXT_CHANNELS",
    "Listing",
    "Op",
    "Schema",
    "documented",
    "install_openapi",
]

Schema = dict[str, Any]
_REF = "#/components/schemas/{model}"

# Statuses every authenticated route can answer, every route, and every route that
# reads a body (a route names the last in its ``errors``).
_AUTH = (401, 403)
_ALWAYS = (429, 431, 503)
BODY = (400, 408, 413, 415, 422)
OBJECT: Schema = {"type": "object"}
# The text channels an answer's texts are in, by field (``contracts.visible``).
TEXT_CHANNELS: Schema = {"type": "object", "additionalProperties": {"type": "string"}}


@dataclass(frozen=True)
class Listing:
    """An answer that lists items under one key (``{key: [item, …]}``), and ``more``
    properties beside it; ``item`` None: each item an object."""

    key: str
    item: type[BaseModel] | None = None
    more: Schema = field(default_factory=dict)


@dataclass(frozen=True)
class Op:
    """What one route takes and answers, for the served document."""

    ok: int = 200
    # a model, a listing, a schema, or a media type
    answer: type[BaseModel] | Listing | Schema | str | None = None
    body: type[BaseModel] | None = None
    form: Schema | None = None  # a form body (application/x-www-form-urlencoded) instead
    archive: bool = False  # also takes an OPA archive (application/vnd.opa+zip)
    errors: tuple[int, ...] = ()
    public: bool = False  # no bearer token needed
    also_ok: tuple[int, ...] = ()  # a second success status with the same answer
    headers: dict[str, str] = field(default_factory=dict)


# What each documented route says of itself, by the key its operation carries.
_DOCUMENTED: dict[str, Op] = {}
_MARK = "x-gatehouse-op"  # taken off the operation again when it is rewritten


def documented(op: Op) -> JsonObject:
    """A route's ``openapi_extra``: what it takes and answers, said where it is routed
    (``@router.post(path, openapi_extra=documented(Op(...)))``)."""
    key = str(len(_DOCUMENTED))
    _DOCUMENTED[key] = op
    return {_MARK: key}


def _codes_by_status() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for code in ErrorCode:
        out.setdefault(code.http_status, []).append(code.value)
    return out


def _error_schema() -> Schema:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "retryable", "details"],
                "properties": {
                    "code": {"type": "string", "enum": sorted(c.value for c in ErrorCode)},
                    "message": {"type": "string"},
                    "retryable": {"type": "boolean"},
                    "details": {"type": "object"},
                },
            }
        },
    }


_REASONS = {
    400: "Bad request",
    401: "No valid bearer token",
    403: "The identity lacks the role",
    404: "Not found",
    408: "The body did not arrive in time",
    409: "Conflict with the run's state",
    413: "Too large",
    415: "Unsupported media type",
    422: "Does not match the schema",
    429: "Too many requests (see Retry-After)",
    431: "Request headers too large",
    502: "An upstream answered badly",
    503: "Unavailable (the database, a dependency, or the shim's limits)",
    504: "An upstream did not answer in time",
}


class _Doc:
    """The document under construction: its components, and schemas hoisted into them."""

    def __init__(self, doc: Schema) -> None:
        self.doc = doc
        self.schemas: Schema = doc.setdefault("components", {}).setdefault("schemas", {})
        self.by_status = _codes_by_status()

    def ref(self, model: type[BaseModel]) -> Schema:
        name = model.__name__
        if name not in self.schemas:
            schema = model.model_json_schema(ref_template=_REF, mode="serialization")
            for inner, definition in schema.pop("$defs", {}).items():
                self.schemas.setdefault(inner, definition)
            self.schemas[name] = schema
        return {"$ref": _REF.format(model=name)}

    def content(self, answer: type[BaseModel] | Listing | Schema | str | None) -> Schema:
        if answer is None:
            return {}
        if isinstance(answer, Listing):
            item = OBJECT if answer.item is None else self.ref(answer.item)
            listed: Schema = {"type": "object", "required": [answer.key], "properties": {
                answer.key: {"type": "array", "items": item}, **answer.more}}  # fmt: skip
            return {"application/json": {"schema": listed}}
        if answer == "text/event-stream":  # each event: id (its seq), event (kind), data
            event = {"type": "object", "required": ["data"], "properties": {
                "id": {"type": "string"}, "event": {"type": "string"},
                "data": {"type": "string", "description": "a run event as JSON"}}}  # fmt: skip
            return {answer: {"schema": event}}
        if isinstance(answer, str):
            binary = answer != "text/plain"
            return {answer: {"schema": {"type": "string", **({"format": "binary"} if binary
                                                                 else {})}}}  # fmt: skip
        schema = self.ref(answer) if isinstance(answer, type) else answer
        return {"application/json": {"schema": schema}}

    def error(self, status: int) -> Schema:
        codes = ", ".join(f"`{c}`" for c in self.by_status.get(status, []))
        return {
            "description": f"{_REASONS.get(status, 'Error')}: {codes or 'see the error code'}",
            "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}},
        }

    def rewrite(self, op: Schema, spec: Op) -> None:
        success: Schema = {"description": "OK", "content": self.content(spec.answer)}
        if spec.headers:
            success["headers"] = {
                name: {"description": text, "schema": {"type": "string"}}
                for name, text in spec.headers.items()
            }
        responses: Schema = {str(spec.ok): success}
        for status in spec.also_ok:
            responses[str(status)] = {**success, "description": "OK (already accepted)"}
        statuses = set(spec.errors) | set(_ALWAYS) | (set() if spec.public else set(_AUTH))
        for status in sorted(statuses):
            responses[str(status)] = self.error(status)
        op["responses"] = responses
        if not spec.public:
            op["security"] = [{"bearer": []}]
        if spec.body is not None:
            content = self.content(spec.body)
            if spec.archive:
                binary = {"schema": {"type": "string", "format": "binary"}}
                content["application/vnd.opa+zip"] = binary
            op["requestBody"] = {"required": True, "content": content}
        if spec.form is not None:
            form = {"application/x-www-form-urlencoded": {"schema": spec.form}}
            op["requestBody"] = {"required": True, "content": form}


# Where an answer leads (OpenAPI links): a client, or a stateful fuzzer, can follow
# an accepted intent to its run, and a run's plan card to a decision on it.
_LINKS: tuple[tuple[str, str, str, str, str, str, Schema], ...] = (
    ("post", "/intent", "202", "GetRun", "get", "/runs/{run_id}",
     {"parameters": {"run_id": "$response.body#/run_id"}}),
    ("post", "/intent", "202", "GetLedger", "get", "/runs/{run_id}/ledger",
     {"parameters": {"run_id": "$response.body#/run_id"}}),
    ("post", "/intent", "202", "GetEpisodes", "get", "/runs/{run_id}/episodes",
     {"parameters": {"run_id": "$response.body#/run_id"}}),
    ("post", "/intent", "202", "Cancel", "post", "/runs/{run_id}/cancel",
     {"parameters": {"run_id": "$response.body#/run_id"}}),
    ("get", "/runs/{run_id}", "200", "Approve", "post", "/approve/{run_id}",
     {"parameters": {"run_id": "$request.path.run_id"},
      "requestBody": {"plan_digest": "$response.body#/plan_card/plan_digest"}}),
    ("get", "/runs/{run_id}", "200", "Reject", "post", "/reject/{run_id}",
     {"parameters": {"run_id": "$request.path.run_id"},
      "requestBody": {"plan_digest": "$response.body#/plan_card/plan_digest"}}),
    ("get", "/runs/{run_id}", "200", "VerifyLedger", "get", "/runs/{run_id}/ledger/verify",
     {"parameters": {"run_id": "$request.path.run_id"}}),
)  # fmt: skip


def _link(doc: Schema) -> None:
    for method, path, status, name, to_method, to_path, how in _LINKS:
        target = doc["paths"][to_path][to_method]["operationId"]
        answer = doc["paths"][path][method]["responses"][status]
        answer.setdefault("links", {})[name] = {"operationId": target, **how}


def _build(app: FastAPI) -> Schema:
    doc = get_openapi(
        title=app.title,
        version=app.version,
        description=(
            'Gatehouse\'s HTTP API. Every error is `{"error": {code, message, retryable,'
            " details}}` with a stable code (docs/api.md's error table); every route but"
            " /healthz, /readyz and /slack/interactions (signed by Slack) needs a bearer"
            " token."
        ),
        routes=app.routes,
    )
    builder = _Doc(doc)
    builder.schemas["Error"] = _error_schema()
    for unused in ("HTTPValidationError", "ValidationError"):
        builder.schemas.pop(unused, None)
    builder.schemas.pop("Body_login_dashboard_login_post", None)
    doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    paths: Schema = {}
    for path, operations in doc["paths"].items():
        if path.startswith("/dashboard"):
            continue
        for method, op in operations.items():
            spec = _DOCUMENTED.get(str(op.pop(_MARK, "")))
            if spec is None:
                raise RuntimeError(
                    f"OpenAPI: {method.upper()} {path} is not described: give its route"
                    " openapi_extra=documented(Op(...))"
                )
            builder.rewrite(op, spec)
        paths[path] = operations
    doc["paths"] = paths
    _link(doc)
    # The catalog ships with the package: the ids an intent may name are known.
    intent = builder.schemas["IntentRequest"]["properties"]
    for key, ids in (
        ("recipe", [r.model.recipe_id for r in catalog.list_recipes()]),
        ("policy_profile", [p.model.profile_id for p in catalog.list_profiles()]),
        ("tool_pool", [t.model.tool_pool_id for t in catalog.list_tool_pools()]),
    ):
        intent[key]["enum"] = sorted(ids)
    return doc


def install_openapi(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json (built once, on first ask)."""
    built: list[Schema] = []

    def openapi() -> Schema:
        if not built:
            built.append(_build(app))
        return built[0]

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override
