"""JSON Schemas (draft 2020-12) of every envelope, loaded locally.

The committed files in ``contracts/schemas/`` are generated from the pydantic
models (``python -m contracts.export``); a unit test fails when they drift.
Validation resolves ``$id``s through a local ``referencing`` registry: no
schema is ever fetched over the network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from pydantic import BaseModel

from contracts._errors import ErrorCode, GatehouseError
from contracts._json import JsonObject, JsonValue
from contracts.cancel import CancelRequest
from contracts.episode import Episode, SecurityEpisode
from contracts.execution import ExecutionEnvelope, ExecutionResult
from contracts.explain import ExplainReport, ExplainView
from contracts.intent import IntentRequest
from contracts.job import Continuation, IntentJob, StretchJob
from contracts.messages import MessageRequest
from contracts.oidc import OidcExchange
from contracts.plan import Plan
from contracts.recipe import Recipe
from contracts.replay import CallResolution, ForkRequest, ReplayReport
from contracts.run import ApprovalRequest, CallView, PlanEditRequest, RunView
from contracts.tool_pool import PolicyProfile, ToolPool

if TYPE_CHECKING:
    import jsonschema
    from referencing import Registry

# jsonschema, jsonschema-rs and referencing are imported when a schema is first used,
# not with the package: a client command that only parses answers starts without them.

__all__ = ["SCHEMA_MODELS", "render_schema", "schema_id", "schema_registry", "validate_instance"]

ID_BASE = "https://gatehouse.dev/schemas/"

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "env.intent_request_v1": IntentRequest,
    "env.intent_job_v1": IntentJob,
    "env.stretch_job_v1": StretchJob,
    "env.continuation_v1": Continuation,
    "env.mova_agent_plan_v1": Plan,
    "env.approval_request_v1": ApprovalRequest,
    "ds.gatehouse_tool_pool_v1": ToolPool,
    "ds.gatehouse_policy_profile_v1": PolicyProfile,
    "ds.gatehouse_recipe_v1": Recipe,
    "ds.gatehouse_run_view_v1": RunView,
    "ds.gatehouse_call_v1": CallView,
    "ds.gatehouse_episode_v1": Episode,
    "ds.gatehouse_security_episode_v1": SecurityEpisode,
    "env.call_resolution_v1": CallResolution,
    "env.fork_request_v1": ForkRequest,
    "ds.gatehouse_replay_report_v1": ReplayReport,
    "env.execution_envelope_v1": ExecutionEnvelope,
    "env.execution_result_v1": ExecutionResult,
    "ds.gatehouse_explain_report_v1": ExplainReport,
    "ds.gatehouse_explain_v1": ExplainView,
    "env.cancel_request_v1": CancelRequest,
    "env.run_message_v1": MessageRequest,
    "env.oidc_exchange_v1": OidcExchange,
    "env.plan_edit_v1": PlanEditRequest,
}


def schema_id(name: str) -> str:
    return f"{ID_BASE}{name}.schema.json"


def render_schema(name: str) -> JsonObject:
    body = SCHEMA_MODELS[name].model_json_schema(mode="validation")
    out: JsonObject = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id(name),
    }
    out.update(body)
    out["title"] = name
    return out


def _load(name: str) -> JsonObject:
    text = resources.files("contracts.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    loaded: JsonObject = json.loads(text)
    return loaded


@cache
def schema_registry() -> Registry[bool | Mapping[str, object]]:
    from referencing import Registry, Resource  # noqa: PLC0415  (see above)
    from referencing.jsonschema import DRAFT202012  # noqa: PLC0415

    registry: Registry[bool | Mapping[str, object]] = Registry()
    for name in SCHEMA_MODELS:
        registry = registry.with_resource(
            schema_id(name), Resource.from_contents(_load(name), default_specification=DRAFT202012)
        )
    return registry


class _RecursiveRefError(Exception):
    """A schema refers to itself: it cannot be written out without ``$ref``."""


def _inlined(node: JsonValue, root: JsonObject, seen: tuple[str, ...]) -> JsonValue:
    """``node`` with every ``$ref`` replaced by what it points at.

    jsonschema resolves each ``$ref`` through ``referencing`` on every
    validation, which is most of the time a plan's check takes; a schema
    without references validates the same instances several times faster.
    """
    if isinstance(node, list):
        return [_inlined(item, root, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out: JsonObject = {k: _inlined(v, root, seen) for k, v in node.items() if k != "$ref"}
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return out
    if ref in seen:
        raise _RecursiveRefError(ref)
    target: JsonValue = root
    if ref.startswith(ID_BASE):
        name, _, pointer = ref[len(ID_BASE) :].partition("#")
        target = root = _load(name.removesuffix(".schema.json"))
    else:
        pointer = ref.removeprefix("#")
    for part in (p for p in pointer.split("/") if p):
        if not isinstance(target, dict):
            raise _RecursiveRefError(ref)  # a pointer this flattening does not follow: keep $ref
        target = target[part.replace("~1", "/").replace("~0", "~")]
    resolved = _inlined(target, root, (*seen, ref))
    out.pop("$defs", None)
    return {"allOf": [resolved], **out} if out else resolved


@cache
def _flat(name: str) -> JsonObject | None:
    """The named schema with its references written out, or None for one that refers
    to itself (validated through the registry)."""
    schema = _load(name)
    try:
        flat = _inlined(schema, schema, ())
    except _RecursiveRefError:
        return None
    assert isinstance(flat, dict)
    flat.pop("$defs", None)
    return flat


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    import jsonschema  # noqa: PLC0415  (see above)

    flat = _flat(name)
    if flat is None:
        by_ref = {"$ref": schema_id(name)}
        return jsonschema.Draft202012Validator(by_ref, registry=schema_registry())
    return jsonschema.Draft202012Validator(flat)


@cache
def _passes(name: str) -> Callable[[JsonValue], bool] | None:
    """jsonschema-rs's yes-or-no for the named schema (compiled once, in Rust: a
    request body's check in ~2 µs against ~260 µs), or None for a schema it is not
    given (one that refers to itself). Formats are not asserted, as in jsonschema."""
    flat = _flat(name)
    if flat is None:
        return None
    import jsonschema_rs  # noqa: PLC0415  (see above)

    return jsonschema_rs.Draft202012Validator(flat, validate_formats=False).is_valid


def _problem(error: jsonschema.ValidationError) -> JsonValue:
    """One failure as a refusal names it: where, what (cut at 300 characters) and, for a
    ``pattern``, the pattern broken (so a caller can say what the value should be
    without reading the words)."""
    found: dict[str, JsonValue] = {
        "path": "/" + "/".join(str(p) for p in error.absolute_path),
        "problem": error.message[:300],
    }
    if error.validator == "pattern" and isinstance(error.validator_value, str):
        found["pattern"] = error.validator_value
    return found


def validate_instance(name: str, instance: JsonValue, code: ErrorCode) -> None:
    """Check ``instance`` against the named schema; raise ``code`` naming each failure.

    A valid instance is passed by jsonschema-rs's quick check; anything it does not
    pass is checked again by jsonschema, whose findings are the answer (what is
    wrong, where) and which has the last word: an instance jsonschema finds nothing
    wrong with is valid. The same check runs in the models besides (pydantic, whose
    patterns are Rust's regular expressions too)."""
    passes = _passes(name)
    if passes is not None:
        try:
            if passes(instance):
                return
        except (ValueError, TypeError, OverflowError):  # a value it cannot take: jsonschema
            pass
    errors = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        problems: list[JsonValue] = [_problem(e) for e in errors[:20]]
        raise GatehouseError(
            code, f"{name}: {len(errors)} schema violation(s)", {"errors": problems}
        )
