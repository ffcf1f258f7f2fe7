"""Cedar in the gate: a profile's policy set decides every step the rest of the gate allowed.

Cedar can only narrow. ``policies.gate.check_step`` runs its deny-by-default
checks first and keeps their refusals; a step they allow is then put to the
profile's Cedar policy set (``PolicyProfile.cedar_rules``), and a step Cedar
does not permit is refused with ``cedar_denied``, naming the policies that
refused it by their ``@id`` annotation.

The entity model (docs/policies.md), in namespace ``Gatehouse``:

* principal ``User::"<name>"``: who submitted the run; at run time
  ``context.approver`` is the ``User`` whose decision let the step's plan run;
* action ``Action::"<driver kind>"``: noop, http, restricted_shell, opencode, mcp_proxy;
* resource ``Connector::"<connector_id>"`` (in ``ToolPool::"<tool_pool_id>"``), or for
  an mcp_proxy step whose tool is known ``McpTool::"<connector_id>/<tool>"`` (in its
  connector);
* context: the step (id, verb, connector), whether it takes outside data
  (``tainted``: its input comes from an earlier step via input_from), whether its
  input is known yet, its risk (``read_only``, ``risk``: "read" or "change"), the
  profile's budgets, and its input by driver kind (an http step's method and URL
  parts, a shell step's program and arguments, an OpenCode prompt, an MCP tool's
  arguments typed by its pinned input schema).

The Cedar schema is generated from the tool pools (``policies.cedar_schema``); a policy set
is validated against it when it is loaded, and a policy that names an entity
type, action or attribute that does not exist, or a connector or MCP tool no
pool has, is refused then (``cedar_policy_invalid``). Pure: no I/O.

An evaluation that errs denies. Cedar skips a policy whose condition errs (a
Long that overflows, an attribute that is missing, a type error) and decides
on the rest, so a ``forbid`` that errs would let the step through; here any
error Cedar reports, a request it cannot build, or an input the context cannot
hold as it is refuses the step with ``cedar_denied``, the errors recorded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import cedarpy

from contracts import (
    CedarRules,
    Connector,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PlanStep,
    PolicyProfile,
    ToolPool,
    sha256_hex,
)
from policies.cedar_schema import entities, schema_for
from policies.cedar_vocab import NAMESPACE, typed
from policies.kinds import rules_of
from policies.read_only import step_read_only

__all__ = [
    "NAMESPACE",
    "CedarDecision",
    "approved",
    "bound",
    "check",
    "decide",
    "load_policy_set",
    "request_for",
]

# How Cedar names the policy an evaluation error came from (an error worded any other
# way still denies; it only names no policy).
_ERRED_IN = re.compile(r"error while evaluating policy `([^`]*)`")


@dataclass(frozen=True)
class CedarDecision:
    allowed: bool
    policy_ids: list[str]  # the @id (else the Cedar id) of every policy that decided it
    # Evaluation errors. Any error denies, whatever Cedar decided: Cedar skips a
    # policy that errs, and a skipped forbid would otherwise fail open.
    errors: list[str]
    erred: list[str] = field(default_factory=list)  # the @id of every policy that erred


@lru_cache(maxsize=64)
def _compiled_pool(pool_json: str) -> tuple[cedarpy.Schema, cedarpy.Entities]:
    pool = ToolPool.model_validate_json(pool_json)
    found = [
        {"uid": {"type": typed(kind), "id": uid}, "attrs": attrs, "parents": parents}
        for kind, uid, attrs, parents in entities([pool])
    ]
    schema = cedarpy.Schema.from_json_str(json.dumps(schema_for([pool])))
    return schema, cedarpy.Entities.from_json_str(json.dumps(found))


@lru_cache(maxsize=64)
def _compiled_policies(text: str) -> tuple[cedarpy.PolicySet, dict[str, str]]:
    """The policy set, and the @id of each policy by the id Cedar gave it."""
    est = json.loads(cedarpy.policies_to_json_str(text))
    static = est.get("staticPolicies") if isinstance(est, dict) else None
    names = {
        str(cedar_id): str(policy["annotations"]["id"])
        for cedar_id, policy in (static.items() if isinstance(static, dict) else [])
        if isinstance(policy, dict) and "id" in policy.get("annotations", {})
    }
    return cedarpy.PolicySet.from_str(text), names


def _entity_refs(value: object) -> Iterator[tuple[str, str]]:
    """Every entity literal in a policy set's JSON form: (type, id)."""
    if isinstance(value, dict):
        entity = value.get("__entity", value.get("entity"))
        if isinstance(entity, dict) and isinstance(entity.get("type"), str):
            yield str(entity["type"]), str(entity.get("id"))
        entities = value.get("entities")
        for e in entities if isinstance(entities, list) else []:
            if isinstance(e, dict) and isinstance(e.get("type"), str):
                yield str(e["type"]), str(e.get("id"))
        for inner in value.values():
            yield from _entity_refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _entity_refs(inner)


def load_policy_set(policy_set_id: str, text: str, pools: Sequence[ToolPool]) -> CedarRules:
    """A policy set checked against the schema of ``pools``, or ``cedar_policy_invalid``
    naming every problem: a parse error, an entity type, action or attribute the
    schema lacks, a connector or MCP tool no pool has."""
    details: JsonObject = {"policy_set_id": policy_set_id}

    def refuse(problems: list[str]) -> GatehouseError:
        listed: list[JsonValue] = list(problems[:20])
        return GatehouseError(
            ErrorCode.CEDAR_POLICY_INVALID,
            f"Cedar policy set {policy_set_id!r} is refused: {'; '.join(problems[:5])}",
            {**details, "problems": listed},
        )

    try:
        est = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        raise refuse([f"it does not parse: {str(exc)[:500]}"]) from exc
    if not est.get("staticPolicies") and not est.get("templates"):
        raise refuse(["it holds no policy"])
    if est.get("templates"):
        raise refuse(["templates are not supported: write static policies"])
    named = [
        str(policy.get("annotations", {}).get("id"))
        for policy in est.get("staticPolicies", {}).values()
        if isinstance(policy, dict) and "id" in policy.get("annotations", {})
    ]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise refuse([f"@id {n!r} names more than one policy" for n in twice])
    result = cedarpy.validate_policies(text, json.dumps(schema_for(pools)))
    if not result.validation_passed:
        raise refuse([str(e)[:300] for e in result.errors])
    known = {(typed(kind), uid) for kind, uid, _, _ in entities(pools)}
    checked = {typed("Connector"), typed("McpTool"), typed("ToolPool")}
    missing = sorted({(t, i) for t, i in _entity_refs(est) if t in checked} - known)
    if missing:
        raise refuse([f"it names {t}::{json.dumps(i)}, which no tool pool has" for t, i in missing])
    digest = sha256_hex(text.encode("utf-8"))
    return CedarRules(policy_set_id=policy_set_id, digest=digest, text=text)


def bound(profile: PolicyProfile, submitted_by: str | None) -> PolicyProfile:
    """``profile`` with its Cedar requests made on behalf of ``submitted_by``."""
    return _with_rules(profile, "submitted_by", submitted_by)


def approved(profile: PolicyProfile, approved_by: str | None) -> PolicyProfile:
    """``profile`` with its Cedar requests naming ``approved_by`` as the approver."""
    return _with_rules(profile, "approved_by", approved_by)


def _with_rules(profile: PolicyProfile, field: str, value: str | None) -> PolicyProfile:
    rules = profile.cedar_rules
    if rules is None or getattr(rules, field) == value:
        return profile
    return profile.model_copy(update={"cedar_rules": rules.model_copy(update={field: value})})


def _whole(value: float | None, scale: int = 1) -> int | None:
    return None if value is None else math.ceil(value * scale)


def _input_context(
    step: PlanStep, step_input: JsonObject, pool: ToolPool, problems: list[str]
) -> JsonObject:
    """The context attributes of the step's input (its kind's, ``policies/kinds``). A
    value the context would carry but cannot hold as it is goes into ``problems`` (which
    deny) rather than being left out: a policy that tests an attribute must never be
    passed by the attribute's absence."""

    def wrong(key: str, wanted: str) -> None:
        problems.append(f"input {key!r} is not {wanted}; the Cedar context cannot hold it")

    return rules_of(step.driver_kind).cedar_context(step_input, pool, wrong)


def request_for(
    step: PlanStep,
    step_input: JsonObject | None,
    connector: Connector,
    pool: ToolPool,
    profile: PolicyProfile,
    *,
    problems: list[str] | None = None,
) -> JsonObject:
    """The Cedar request that decides ``step``: principal, action, resource, context.
    What of the input the context cannot hold is appended to ``problems``."""
    rules = profile.cedar_rules
    who = "" if rules is None or rules.submitted_by is None else rules.submitted_by
    resource = rules_of(step.driver_kind).cedar_resource(connector.connector_id, step_input)
    if resource is None:
        resource = {"type": typed("Connector"), "id": connector.connector_id}
    read_only = step_read_only(step, step_input, connector)
    b = profile.budgets
    budgets: JsonObject = {
        k: v
        for k, v in {
            "max_steps": b.max_steps,
            "max_model_turns": b.max_model_turns,
            "max_tokens": b.max_tokens,
            "max_cost_cents": _whole(b.max_cost_usd, 100),
            "max_wall_s": _whole(b.max_wall_s),
        }.items()
        if v is not None
    }
    context: JsonObject = {
        "step_id": step.step_id,
        "verb": step.verb.value,
        "connector_id": connector.connector_id,
        "tool_pool": pool.tool_pool_id,
        "profile": profile.profile_id,
        "tainted": step.input_from is not None,
        "input_known": step_input is not None,
        "read_only": read_only,
        "risk": "read" if read_only else "change",
        "profile_max_steps": profile.max_steps,
        "budgets": budgets,
    }
    if rules is not None and rules.approved_by is not None:
        context["approver"] = {"__entity": {"type": typed("User"), "id": rules.approved_by}}
    if step_input is not None:
        found: list[str] = []
        context.update(_input_context(step, step_input, pool, found))
        if problems is not None:
            problems.extend(found)
    return {
        "principal": {"type": typed("User"), "id": who},
        "action": {"type": typed("Action"), "id": step.driver_kind.value},
        "resource": resource,
        "context": context,
    }


def decide(
    step: PlanStep,
    step_input: JsonObject | None,
    connector: Connector,
    pool: ToolPool,
    profile: PolicyProfile,
) -> CedarDecision | None:
    """Cedar's decision on a step (None: the profile names no policy set). Not allowed
    when anything erred: a policy's evaluation, the request, the input's context."""
    rules = profile.cedar_rules
    if rules is None:
        if profile.cedar is None:
            return None
        # Named but not attached: deciding without it would skip every forbid.
        return CedarDecision(False, [], [f"Cedar policy set {profile.cedar!r} is not loaded"])
    problems: list[str] = []
    request = request_for(step, step_input, connector, pool, profile, problems=problems)
    if problems:
        return CedarDecision(False, [], problems)
    try:
        schema, entities = _compiled_pool(pool.model_dump_json())
        policies, names = _compiled_policies(rules.text)
        result = cedarpy.is_authorized(request, policies, entities, schema)
    except Exception as exc:  # noqa: BLE001 - whatever Cedar raises, the step is denied, not crashed
        return CedarDecision(False, [], [f"Cedar could not evaluate it: {str(exc)[:300]}"])
    diagnostics = result.diagnostics
    by_reason = diagnostics.id_annotations_by_reason
    ids = [by_reason.get(r, r) for r in diagnostics.reasons]
    errors = [str(e)[:300] for e in diagnostics.errors]
    erred = [names.get(m.group(1), m.group(1)) for e in errors if (m := _ERRED_IN.search(e))]
    erred = sorted(set(erred))
    if not errors:
        return CedarDecision(result.allowed, ids, [])
    # Denied for the errors: the policies that permitted it did not decide it.
    deciding = [] if result.allowed else ids
    named = [*deciding, *(i for i in erred if i not in deciding)]
    return CedarDecision(False, named, errors, erred)


def check(
    step: PlanStep,
    step_input: JsonObject | None,
    connector: Connector,
    pool: ToolPool,
    profile: PolicyProfile,
) -> None:
    """Refuse the step with ``cedar_denied`` unless the profile's Cedar policy set permits it."""
    found = decide(step, step_input, connector, pool, profile)
    if found is None or found.allowed:
        return
    rules = profile.cedar_rules
    set_id = profile.cedar if rules is None else rules.policy_set_id
    forbids = [i for i in found.policy_ids if i not in found.erred]
    if forbids:
        why = "denied by " + ", ".join(repr(i) for i in forbids)
    elif not found.errors:
        why = "no policy permits it"
    else:
        why = "denied"
    if found.errors:
        erred = ", ".join(repr(i) for i in found.erred) or "the request"
        why += f": {erred} erred, and an evaluation that errs denies"
        why += f" ({'; '.join(found.errors[:3])})"
    raise GatehouseError(
        ErrorCode.CEDAR_DENIED,
        f"step {step.step_id!r}: Cedar policy set {set_id!r} {why}",
        {
            "step_id": step.step_id,
            "connector_id": step.connector_id,
            "policy_set_id": set_id,
            "policy_set_digest": None if rules is None else rules.digest,
            "policy_ids": list[JsonValue](found.policy_ids),
            "errors": list[JsonValue](found.errors[:10]),
        },
    )
