"""Cedar in the gate (policies/cedar_gate.py): it only narrows, names the denying
policies, decides with the submitter, the step's input and taint, and refuses at
load a policy set that names what the tool pools do not have."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import (
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Plan,
    PolicyProfile,
    ToolPool,
)
from policies import catalog, cedar_gate, cedar_schema
from policies.gate import check_step, decide_plan, gate_plan
from tests.unit.policies.test_mcp_policy import connector

POOL = catalog.tool_pool("default").model
GUARDED = catalog.profile("guarded").model
PERMIT_ALL = '@id("all") permit (principal, action, resource);\n'


def _with(text: str, who: str | None = "alice", base: PolicyProfile = GUARDED) -> PolicyProfile:
    rules = cedar_gate.load_policy_set("test", text, [POOL])
    profile = base.model_copy(update={"cedar": "test", "cedar_rules": rules})
    return cedar_gate.bound(profile, who)


def _plan(*steps: dict[str, Any]) -> Plan:
    return Plan.model_validate({"objective": "cedar", "steps": list(steps)})


def _http(step_id: str, method: str = "GET", connector: str = "local-http") -> dict[str, Any]:
    url = "http://127.0.0.1:8000/items"
    return {
        "step_id": step_id,
        "verb": "fetch",
        "connector_id": connector,
        "driver_kind": "http",
        "input": {"method": method, "url": url},
    }


def _shell(step_id: str, *argv: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": list(argv)},
    }


def _refusal(plan: Plan, profile: PolicyProfile) -> GatehouseError:
    with pytest.raises(GatehouseError) as caught:
        gate_plan(plan, POOL, profile)
    return caught.value


def test_the_shipped_guarded_profile_carries_its_policy_set() -> None:
    rules = GUARDED.cedar_rules
    assert GUARDED.cedar == "guardrails" and rules is not None
    found = catalog.cedar_policy_set("guardrails")
    assert found is not None and found.digest == rules.digest
    assert catalog.profile("default").model.cedar_rules is None


def test_a_profile_without_cedar_dumps_as_before() -> None:
    dumped = catalog.profile("default").model.model_dump(mode="json")
    assert "cedar" not in dumped and "cedar_rules" not in dumped
    assert GUARDED.model_dump(mode="json")["cedar"] == "guardrails"


def test_a_cedar_deny_names_the_policy() -> None:
    profile = cedar_gate.bound(GUARDED, "alice")
    gate_plan(_plan(_http("read")), POOL, profile)
    refused = _refusal(_plan(_http("write", "POST")), profile)
    assert refused.code is ErrorCode.CEDAR_DENIED
    assert "'http-reads-only'" in refused.message
    assert refused.details["policy_ids"] == ["http-reads-only"]
    assert refused.details["policy_set_id"] == "guardrails"
    unkeyed = _refusal(_plan(_http("r", connector="local-http-unkeyed")), profile)
    assert unkeyed.details["policy_ids"] == ["no-unkeyed-callees"]


def test_cedar_only_narrows_the_gates_own_refusal_stays() -> None:
    # Cedar permits everything here; the pool still refuses the flag.
    profile = _with(PERMIT_ALL)
    refused = _refusal(_plan(_shell("s", "ls", "-R")), profile)
    assert refused.code is ErrorCode.COMMAND_NOT_ALLOWED
    gate_plan(_plan(_shell("s", "ls", "-l")), POOL, profile)


def test_nothing_permitted_is_denied_by_default() -> None:
    profile = _with(
        '@id("only-notes") permit (principal, action == Gatehouse::Action::"noop", resource);'
    )
    refused = _refusal(_plan(_http("read")), profile)
    assert refused.code is ErrorCode.CEDAR_DENIED
    assert "no policy permits it" in refused.message and refused.details["policy_ids"] == []


def test_the_principal_is_the_submitter() -> None:
    text = PERMIT_ALL + (
        '@id("bob-reads-nothing") forbid (principal == Gatehouse::User::"bob", action, resource);'
    )
    gate_plan(_plan(_http("read")), POOL, _with(text, "alice"))
    refused = _refusal(_plan(_http("read")), _with(text, "bob"))
    assert refused.details["policy_ids"] == ["bob-reads-nothing"]


def test_context_carries_taint_and_input_known_only_once_resolved() -> None:
    text = PERMIT_ALL + (
        '@id("no-secret-args") forbid (principal, action, resource)'
        ' when { context has args && context.args.contains("secret") };\n'
        '@id("tainted-needs-known-input") forbid (principal, action, resource)'
        ' when { context.tainted && !context.input_known && context.verb == "run" };'
    )
    profile = _with(text)
    step = _plan(
        {
            "step_id": "n",
            "verb": "note",
            "connector_id": "note",
            "driver_kind": "noop",
            "input": {"w": "secret"},
        },
        {
            "step_id": "s",
            "verb": "note",
            "connector_id": "workspace-shell",
            "driver_kind": "restricted_shell",
            "input": {"argv": ["echo"]},
            "input_from": {"step_id": "n", "pointer": "/w", "into": "/argv/1"},
        },
    ).steps[1]
    # at compile time: the fixed input only; right before the step, the resolved one
    check_step(step, step.input, POOL, profile)
    with pytest.raises(GatehouseError) as caught:
        check_step(step, {"argv": ["echo", "secret"]}, POOL, profile)
    assert caught.value.details["policy_ids"] == ["no-secret-args"]
    request = cedar_gate.request_for(step, None, POOL.connectors[0], POOL, profile)
    context = request["context"]
    assert isinstance(context, dict)
    assert context["tainted"] is True and context["input_known"] is False


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("permit (principal is Gatehouse::Robot, action, resource);", "Robot"),
        ('permit (principal, action == Gatehouse::Action::"ftp", resource);', "ftp"),
        ('permit (principal, action, resource) when { context.weather == "fine" };', "weather"),
        ('permit (principal, action, resource == Gatehouse::Connector::"nope");', "nope"),
        ("permit (principal, action, resource", "parse"),
        ("// nothing here\n", "no policy"),
        (PERMIT_ALL + '@id("all") forbid (principal, action, resource);', "'all' names more"),
    ],
)
def test_a_policy_naming_what_does_not_exist_is_refused_at_load(text: str, named: str) -> None:
    with pytest.raises(GatehouseError) as caught:
        cedar_gate.load_policy_set("bad", text, [POOL])
    assert caught.value.code is ErrorCode.CEDAR_POLICY_INVALID
    assert named in caught.value.message
    assert caught.value.message.startswith("Cedar policy set 'bad' is refused")


def test_the_schema_has_an_action_per_driver_kind_and_the_pool_entities() -> None:
    schema = cedar_schema.schema_for([POOL])
    body = schema["Gatehouse"]
    assert isinstance(body, dict)
    actions, types = body["actions"], body["entityTypes"]
    assert isinstance(actions, dict) and isinstance(types, dict)
    assert set(actions) == {k.value for k in DriverKind}  # one action per kind, as KINDS lists
    assert {"User", "ToolPool", "Connector", "McpTool"} <= set(types)
    # a connector the pool has may be named; its membership in the pool holds
    text = PERMIT_ALL + (
        '@id("not-this-one") forbid (principal, action,'
        ' resource in Gatehouse::ToolPool::"default") when { resource is Gatehouse::Connector'
        ' && resource == Gatehouse::Connector::"note" };'
    )
    refused = _refusal(
        _plan(
            {
                "step_id": "n",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input": {},
            }
        ),
        _with(text),
    )
    assert refused.details["policy_ids"] == ["not-this-one"]


def test_an_mcp_step_is_decided_on_its_pinned_tool_and_typed_arguments() -> None:
    calc = connector(read_only_tools=["add"])
    pool = ToolPool(
        tool_pool_id="mcp-test", version="1", description="one MCP server", connectors=[calc]
    )
    text = PERMIT_ALL + (
        '@id("small-sums") forbid (principal, action == Gatehouse::Action::"mcp_proxy",'
        ' resource == Gatehouse::McpTool::"calc/add")'
        " when { context has arguments && context.arguments has a && context.arguments.a > 100"
        " && resource.read_only };"
    )
    rules = cedar_gate.load_policy_set("mcp", text, [pool])
    base = GUARDED.model_copy(
        update={"allowed_driver_kinds": [*GUARDED.allowed_driver_kinds, "mcp_proxy"]}
    )
    profile = cedar_gate.bound(
        base.model_copy(update={"cedar": "mcp", "cedar_rules": rules}), "alice"
    )

    def call(a: int) -> Plan:
        return _plan(
            {
                "step_id": "sum",
                "verb": "read",
                "connector_id": "calc",
                "driver_kind": "mcp_proxy",
                "input": {"tool": "add", "arguments": {"a": a, "b": 1}},
            }
        )

    gate_plan(call(5), pool, profile)
    with pytest.raises(GatehouseError) as caught:
        gate_plan(call(500), pool, profile)
    assert caught.value.details["policy_ids"] == ["small-sums"]
    # a tool the pool does not pin cannot be named
    with pytest.raises(GatehouseError, match="calc/sub"):
        cedar_gate.load_policy_set(
            "mcp",
            PERMIT_ALL + 'forbid (principal, action, resource == Gatehouse::McpTool::"calc/sub");',
            [pool],
        )


def test_at_run_time_the_approver_is_in_the_context() -> None:
    only_olga = (
        PERMIT_ALL + '@id("olga-approves-shell")\n'
        'forbid (principal, action == Gatehouse::Action::"restricted_shell", resource)\n'
        'when { context has approver && context.approver != Gatehouse::User::"olga" };\n'
    )
    profile = _with(only_olga)
    step = _plan(_shell("look", "ls")).steps[0]
    shell_input: JsonObject = {"argv": ["ls"]}
    check_step(step, shell_input, POOL, profile)  # at submit no one has approved yet
    check_step(step, shell_input, POOL, cedar_gate.approved(profile, "olga"))
    with pytest.raises(GatehouseError) as caught:
        check_step(step, shell_input, POOL, cedar_gate.approved(profile, "bob"))
    assert caught.value.details["policy_ids"] == ["olga-approves-shell"]
    assert cedar_gate.approved(catalog.profile("default").model, "bob").cedar_rules is None


def test_every_step_an_outside_value_would_fill_wrongly_is_refused_not_only_the_first() -> None:
    whole = {"step_id": "get", "pointer": ""}
    plan = _plan(
        _http("get"),
        {**_http("b"), "input": None, "input_from": whole},
        {**_http("c"), "input": None, "input_from": whole},
        _http("d"),
    )
    verdicts = {v.step_id: v for v in decide_plan(plan, POOL, catalog.profile("default").model)}
    assert [s for s, v in verdicts.items() if not v.allowed] == ["b", "c"]
    assert {verdicts[s].code for s in ("b", "c")} == {ErrorCode.TAINTED_INPUT.value}
