"""An evaluation that errs denies (issue 48, item 3).

Cedar skips a policy whose condition errs and decides on the others, so a
``forbid`` that overflows used to let the step through. Each class of error is
fed to each decider that uses the gate (the gate at submit, the gate right
before a step, the verdicts that ``policy test`` reports, ``what-if``), in a
``forbid`` and in a ``permit``; each must deny and record the error. The gate's
own checks are fed hostile shapes and must refuse them, never raise anything
else or let them through."""

from __future__ import annotations

import math
from typing import Any

import pytest

from contracts import (
    CedarRules,
    Connector,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlanStep,
    PolicyProfile,
    RecordedPlan,
    ToolPool,
    sha256_hex,
)
from contracts.tool_pool import mcp_tool_digest
from policies import catalog, cedar_gate
from policies.fail_closed import refusing
from policies.gate import check_step, decide_plan, gate_plan
from policies.taint import check_resolved, position
from policies.what_if import Proposal, RulesOfTheirTime, what_if
from tests.unit.policies import gate_cases
from tests.unit.policies.test_mcp_policy import connector

PERMIT_ALL = '@id("all") permit (principal, action, resource);\n'
CALC = connector(read_only_tools=["add"])
MCP_POOL = ToolPool(
    tool_pool_id="mcp-errors", version="1", description="one MCP server", connectors=[CALC]
)
GUARDED = catalog.profile("guarded").model
MCP_PROFILE = GUARDED.model_copy(
    update={"allowed_driver_kinds": [*GUARDED.allowed_driver_kinds, DriverKind.MCP_PROXY]}
)
BIG = 2**62  # the examiner's amount: a Long, but times 100 it is not

# Every class of evaluation error, each as a condition on the MCP step's context.
OVERFLOWS = {
    "multiply": "context.arguments.a * 100 > 100000",
    "add": "context.arguments.a + 9223372036854775000 < 0",
    "subtract": "-9223372036854775000 - context.arguments.a > 0",
}
MISSING = {
    "context-argument": "context.arguments.nope == 1",
    "context": "context.nope == 1",
    "resource": "resource.nope == 1",
}
TYPE_ERRORS = {
    "string-less-than-long": "context.tool < 1",
    "contains-on-a-string": "context.tool.contains(1)",
    "contains-on-a-long": "context.arguments.a.contains(1)",
    "like-on-a-long": 'context.arguments.a like "*"',
}
ERRORS = {**OVERFLOWS, **MISSING, **TYPE_ERRORS}
# The policy that errs, beside a permit of everything (forbid: the examiner's case;
# permit: one erring permit beside one that holds), or alone.
SHAPES = {
    "forbid": PERMIT_ALL + '@id("errs") forbid (principal, action, resource) when {{ {} }};',
    "permit": PERMIT_ALL + '@id("errs") permit (principal, action, resource) when {{ {} }};',
    "lone-permit": '@id("errs") permit (principal, action, resource) when {{ {} }};',
}


def _unvalidated(text: str) -> CedarRules:
    """A policy set as the gate may meet it without validation against today's schema:
    a version kept by digest (what-if judges a run by the rules of its time) or one
    written before a pool changed. Strict validation would refuse missing attributes
    and type errors at load; overflow passes it (see the test below)."""
    return CedarRules(policy_set_id="errs", digest=sha256_hex(text.encode()), text=text)


def _profile(rules: CedarRules, base: PolicyProfile = MCP_PROFILE) -> PolicyProfile:
    return cedar_gate.bound(base.model_copy(update={"cedar": "errs", "cedar_rules": rules}), "a")


def _mcp_plan(a: JsonValue) -> Plan:
    return Plan.model_validate(
        {
            "objective": "sum",
            "steps": [
                {
                    "step_id": "sum",
                    "verb": "read",
                    "connector_id": "calc",
                    "driver_kind": "mcp_proxy",
                    "input": {"tool": "add", "arguments": {"a": a, "b": 1}},
                }
            ],
        }
    )


def _assert_erred(refusal: GatehouseError, policy: str | None = "errs") -> None:
    assert refusal.code is ErrorCode.CEDAR_DENIED
    errors = refusal.details["errors"]
    assert isinstance(errors, list) and errors, "the error is recorded"
    assert "an evaluation that errs denies" in refusal.message
    if policy is not None:
        assert refusal.details["policy_ids"] == [policy]
        assert "all" not in refusal.message  # the permit did not decide it


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_a_cedar_policy_that_errs_denies_in_every_decider(shape: str, error: str) -> None:
    profile = _profile(_unvalidated(SHAPES[shape].format(ERRORS[error])))
    plan = _mcp_plan(BIG)
    [step] = plan.steps
    decision = cedar_gate.decide(step, step.input, CALC, MCP_POOL, profile)
    assert decision is not None and not decision.allowed and decision.errors
    assert decision.erred == ["errs"]
    with pytest.raises(GatehouseError) as at_submit:
        gate_plan(plan, MCP_POOL, profile)
    _assert_erred(at_submit.value)
    assert step.input is not None
    with pytest.raises(GatehouseError) as before_the_step:
        check_step(step, dict(step.input), MCP_POOL, cedar_gate.approved(profile, "olga"))
    _assert_erred(before_the_step.value)
    [verdict] = decide_plan(plan, MCP_POOL, profile, {"sum": dict(step.input)})
    assert not verdict.allowed and verdict.code == ErrorCode.CEDAR_DENIED.value
    assert verdict.policy_ids == ["errs"]


@pytest.mark.parametrize("op", sorted(OVERFLOWS))
def test_a_strictly_validated_forbid_that_overflows_still_applies(op: str) -> None:
    # The examiner's case: it passes strict validation, then overflows on 2^62.
    has = "context has arguments && context.arguments has a"
    text = PERMIT_ALL + (
        f'@id("errs") forbid (principal, action, resource) when {{ {has} && {OVERFLOWS[op]} }};'
    )
    profile = _profile(cedar_gate.load_policy_set("errs", text, [MCP_POOL]))
    gate_plan(_mcp_plan(5), MCP_POOL, profile)  # small enough: no error, the permit holds
    with pytest.raises(GatehouseError) as refused:
        gate_plan(_mcp_plan(BIG), MCP_POOL, profile)
    _assert_erred(refused.value)
    errors = refused.value.details["errors"]
    assert isinstance(errors, list) and "overflow" in str(errors[0])


SMALL_SUMS = PERMIT_ALL + (
    '@id("small") forbid (principal, action, resource)'
    " when { context has arguments && context.arguments has a && context.arguments.a > 100 };"
)


@pytest.mark.parametrize("a", [500.0, 1e18, 1e300])
def test_a_whole_number_written_as_a_float_is_the_long_the_policy_tests(a: float) -> None:
    # The pinned schema's "integer" takes 500.0; the context must not drop it.
    profile = _profile(cedar_gate.load_policy_set("small", SMALL_SUMS, [MCP_POOL]))
    with pytest.raises(GatehouseError) as refused:
        gate_plan(_mcp_plan(a), MCP_POOL, profile)
    assert refused.value.code is ErrorCode.CEDAR_DENIED
    named = refused.value.details["policy_ids"]
    errors = refused.value.details["errors"]
    # within Cedar's range the forbid decides; beyond it the context cannot hold it
    assert named == ["small"] if a < 2**63 else (named == [] and errors)


@pytest.mark.parametrize(
    "a", [2**63, -(2**63) - 1, 2**70, math.inf, -math.inf, math.nan, 1.5, True, "1", [1], {"x": 1}]
)
def test_an_argument_cedar_cannot_hold_is_refused_not_left_out(a: JsonValue) -> None:
    profile = _profile(cedar_gate.load_policy_set("small", SMALL_SUMS, [MCP_POOL]))
    with pytest.raises(GatehouseError) as refused:
        gate_plan(_mcp_plan(a), MCP_POOL, profile)
    # the pinned schema refuses most of them; what it takes, the context refuses
    assert refused.value.code in {ErrorCode.PLAN_INVALID, ErrorCode.CEDAR_DENIED}
    # and a bare decide (no schema check first) never lets one through
    step = _mcp_plan(1).steps[0]
    found = cedar_gate.decide(step, {"tool": "add", "arguments": {"a": a}}, CALC, MCP_POOL, profile)
    assert found is not None and not found.allowed and found.errors


def test_a_policy_set_cedar_cannot_read_denies_with_the_error() -> None:
    profile = _profile(_unvalidated("permit (principal, action"))
    with pytest.raises(GatehouseError) as refused:
        gate_plan(_mcp_plan(1), MCP_POOL, profile)
    _assert_erred(refused.value, policy=None)


def _recorded(plan: Plan, digest: str) -> RecordedPlan:
    return RecordedPlan(
        run_id="r",
        created_at="2026-12-01T00:00:00+00:00",
        submitted_by="alice",
        policy_profile="guarded",
        tool_pool="default",
        profile_digest=catalog.profile("guarded").digest,
        tool_pool_digest=catalog.tool_pool("default").digest,
        cedar_digest=digest,
        plan=plan,
    )


def test_what_if_agrees_with_the_gate_on_a_policy_that_errs() -> None:
    pool = catalog.tool_pool("default").model
    loose = cedar_gate.load_policy_set("guardrails", PERMIT_ALL, [pool])
    # Strictly valid, and it overflows on every request.
    erring = cedar_gate.load_policy_set(
        "guardrails",
        PERMIT_ALL + '@id("errs") forbid (principal, action, resource)'
        " when { context.profile_max_steps * 9223372036854775807 > 0 };",
        [pool],
    )
    plan = Plan.model_validate(
        {
            "objective": "w",
            "steps": [
                {
                    "step_id": "read",
                    "verb": "fetch",
                    "connector_id": "local-http",
                    "driver_kind": "http",
                    "input": {"method": "GET", "url": "http://127.0.0.1:8000/x"},
                }
            ],
        }
    )
    kept = {loose.digest: ("guardrails", loose.text), erring.digest: ("guardrails", erring.text)}
    report = what_if(
        [_recorded(plan, loose.digest)], Proposal(cedar=erring), RulesOfTheirTime(kept), "d"
    )
    assert report.steps_now_refused == 1
    [change] = report.runs[0].changes
    assert (change.code, change.policy_ids) == ("cedar_denied", ["errs"])
    assert "an evaluation that errs denies" in change.reason
    with pytest.raises(GatehouseError) as gate:
        gate_plan(plan, pool, _profile(erring, GUARDED))
    assert gate.value.details["policy_ids"] == ["errs"]


# The gate's own checks: hostile shapes in every input position of every driver kind.
HOSTILE: list[JsonValue] = [
    None, True, -1, 2**62, 2**63, 2**70, -(2**64), 1.5, 500.0, 1e308, math.inf, -math.inf,
    math.nan, "", "\x00", "-x", "/etc", [], [1], [[["x"]]], {}, {"a": {"b": 1}}, [None],
]  # fmt: skip
BASES: dict[DriverKind, JsonObject] = {
    DriverKind.NOOP: {"note": "n"},
    DriverKind.HTTP: {"method": "GET", "url": "http://127.0.0.1:8000/items"},
    DriverKind.RESTRICTED_SHELL: {"argv": ["ls", "-l"]},
    DriverKind.OPENCODE: {"prompt": "look"},
    DriverKind.MCP_PROXY: {"tool": "add", "arguments": {"a": 1, "b": 2}},
}
KEYS: dict[DriverKind, list[str]] = {
    DriverKind.NOOP: ["note"],
    DriverKind.HTTP: ["method", "url", "headers", "json", "save_as"],
    DriverKind.RESTRICTED_SHELL: ["argv", "stdin"],
    DriverKind.OPENCODE: ["prompt", "subgoals"],
    DriverKind.MCP_PROXY: ["tool", "arguments"],
}


def _shapes(kind: DriverKind) -> list[JsonObject]:
    base = BASES[kind]
    out = [{**base, key: value} for key in KEYS[kind] for value in HOSTILE]
    if kind is DriverKind.RESTRICTED_SHELL:
        out += [{"argv": ["ls", value]} for value in HOSTILE]
    if kind is DriverKind.MCP_PROXY:
        out += [{"tool": "add", "arguments": {"a": value, "b": 1}} for value in HOSTILE]
    return out


POOLS = [catalog.tool_pool("default").model, MCP_POOL, gate_cases.POOL]


@pytest.mark.parametrize("kind", list(DriverKind), ids=lambda k: k.value)
def test_hostile_input_shapes_are_decided_never_raised(kind: DriverKind) -> None:
    every_kind = {"allowed_driver_kinds": list(DriverKind)}
    profiles = [
        catalog.profile("default").model.model_copy(update=every_kind),
        _profile(cedar_gate.load_policy_set("small", SMALL_SUMS, [MCP_POOL])).model_copy(
            update=every_kind
        ),
    ]
    connectors = [(p, c) for p in POOLS for c in p.connectors if c.driver_kind is kind]
    assert connectors
    for pool, conn in connectors:
        step = PlanStep.model_validate(
            {
                "step_id": "s",
                "verb": "run",
                "connector_id": conn.connector_id,
                "driver_kind": kind.value,
                "input": BASES[kind],
            }
        )
        for profile in profiles:
            for shape in _shapes(kind):
                try:
                    check_step(step, shape, pool, profile)
                except GatehouseError:
                    continue
                # allowed: then Cedar saw every argument the policy may test
                if kind is DriverKind.MCP_PROXY and profile.cedar_rules is not None:
                    a = shape.get("arguments")
                    assert isinstance(a, dict) and isinstance(a.get("a"), int)


def _fed(into: str, fixed: JsonObject) -> Plan:
    return Plan.model_validate(
        {
            "objective": "o",
            "steps": [
                {
                    "step_id": "get",
                    "verb": "fetch",
                    "connector_id": "local-http",
                    "driver_kind": "http",
                    "input": {"url": "http://127.0.0.1:8000/items"},
                },
                {
                    "step_id": "s",
                    "verb": "run",
                    "connector_id": "workspace-shell",
                    "driver_kind": "restricted_shell",
                    "input": fixed,
                    "input_from": {"step_id": "get", "pointer": "/x", "into": into},
                },
            ],
        }
    )


# Tokens str.isdigit takes that are no RFC 6901 index: superscripts (int() raises),
# other scripts' digits (int() reads them as numbers), and leading zeros.
NOT_INDEXES = ["\u00b2", "\u00b9", "\u0661", "\u0967", "\uff11", "01", "00"]


@pytest.mark.parametrize("token", NOT_INDEXES)
def test_a_pointer_token_that_is_no_index_is_refused_not_raised(token: str) -> None:
    fixed: JsonObject = {"argv": ["ls"], "stdin": None, "nest": [{"k": "v"}, {"k": "w"}]}
    profile = catalog.profile("default").model
    pool = catalog.tool_pool("default").model
    for into in (f"/argv/{token}", f"/nest/{token}/new"):
        plan = _fed(into, fixed)
        step = plan.steps[1]
        with pytest.raises(GatehouseError) as refused:
            position(step)
        assert refused.value.code is ErrorCode.PLAN_INVALID
        with pytest.raises(GatehouseError):
            gate_plan(plan, pool, profile)
        verdicts = decide_plan(plan, pool, profile)
        assert [v.allowed for v in verdicts] == [True, False]
        with pytest.raises(GatehouseError):
            check_resolved(step, plan, profile, {"argv": ["ls", "x"]})


def _pinned(schema: dict[str, Any]) -> Connector:
    tool = {
        "name": "add",
        "description": "d",
        "input_schema": schema,
        "digest": mcp_tool_digest("add", "d", schema),
    }
    return connector(tools=[tool])


@pytest.mark.parametrize(
    "argument",
    [
        {"$ref": "https://example.invalid/a.json"},  # resolves nowhere (and is never fetched)
        {"$ref": "#/nowhere"},
        {"type": "no-such-type"},
        {"pattern": "("},
    ],
)
def test_a_pinned_schema_that_cannot_be_applied_refuses(argument: dict[str, Any]) -> None:
    calc = _pinned({"type": "object", "properties": {"a": argument}})
    pool = ToolPool(tool_pool_id="p", version="1", description="d", connectors=[calc])
    step = _mcp_plan(1).steps[0]
    with pytest.raises(GatehouseError) as refused:
        check_step(step, {"tool": "add", "arguments": {"a": "x"}}, pool, MCP_PROFILE)
    assert refused.value.code is ErrorCode.PLAN_INVALID
    assert refused.value.details["errors"]


def test_a_check_that_raises_refuses_and_a_refusal_passes_through() -> None:
    with pytest.raises(GatehouseError) as caught, refusing("s"):
        raise ValueError("a shape nobody foresaw")
    assert caught.value.code is ErrorCode.PLAN_INVALID
    assert caught.value.details == {
        "step_id": "s",
        "errors": ["ValueError: a shape nobody foresaw"],
    }
    own = GatehouseError(ErrorCode.TAINTED_INPUT, "no")
    with pytest.raises(GatehouseError) as kept, refusing("s"):
        raise own
    assert kept.value is own


def test_a_profile_whose_named_policy_set_is_not_loaded_denies() -> None:
    # A profile that names a Cedar set whose text is not attached must not be decided
    # as if it named none: every forbid in that set would be skipped.
    unloaded = MCP_PROFILE.model_copy(update={"cedar_rules": None})
    with pytest.raises(GatehouseError) as refused:
        gate_plan(_mcp_plan(1), MCP_POOL, unloaded)
    assert refused.value.code is ErrorCode.CEDAR_DENIED
    assert refused.value.details["policy_set_id"] == "guardrails"
    assert refused.value.details["errors"] == ["Cedar policy set 'guardrails' is not loaded"]


def test_what_if_skips_a_run_whose_policy_set_is_neither_in_force_nor_kept() -> None:
    pool = catalog.tool_pool("default").model
    then = GUARDED.model_copy(update={"cedar": "gone", "cedar_rules": None, "version": "0"})
    body = then.model_dump_json()
    digest = sha256_hex(body.encode())
    plan = Plan.model_validate(
        {
            "objective": "w",
            "steps": [
                {
                    "step_id": "n",
                    "verb": "note",
                    "connector_id": "note",
                    "driver_kind": "noop",
                    "input": {},
                }
            ],
        }
    )
    run = _recorded(plan, "").model_copy(update={"profile_digest": digest, "cedar_digest": None})
    proposal = Proposal(
        cedar=cedar_gate.load_policy_set("gone", PERMIT_ALL, [pool]), for_profile="guarded"
    )
    report = what_if([run], proposal, RulesOfTheirTime({digest: ("guarded", body)}), "d")
    assert (report.runs_skipped, report.runs_evaluated) == (1, 0)
