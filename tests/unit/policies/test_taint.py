"""Taint: a value from outside the approved plan fills only positions marked as data."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import (
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Plan,
    PlanStep,
    PolicyProfile,
    digest_of,
)
from policies import catalog
from policies.taint import check_plan, check_resolved, position, tainted
from worker.flow import resolve_input

PROFILE = catalog.profile("default").model

FETCH: dict[str, Any] = {
    "step_id": "fetch",
    "verb": "fetch",
    "connector_id": "local-http",
    "driver_kind": "http",
    "input": {"url": "http://127.0.0.1:9/data"},
}
NOTE: dict[str, Any] = {
    "step_id": "note",
    "verb": "note",
    "connector_id": "note",
    "driver_kind": "noop",
    "input": {"text": "fixed"},
}


def _fed(kind: str, source: str, fixed: JsonObject | None = None, **frm: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_id": "use",
        "verb": "run",
        "connector_id": {"http": "local-http", "restricted_shell": "workspace-shell"}.get(
            kind, "note"
        ),
        "driver_kind": kind,
        "input_from": {"step_id": source, **frm},
    }
    if fixed is not None:
        step["input"] = fixed
    return step


def _plan(*steps: dict[str, Any]) -> Plan:
    return Plan.model_validate({"objective": "taint", "steps": list(steps)})


def _refused(plan: Plan, profile: PolicyProfile = PROFILE) -> GatehouseError:
    with pytest.raises(GatehouseError) as info:
        check_plan(plan, profile)
    assert info.value.code is ErrorCode.TAINTED_INPUT
    return info.value


def test_outside_data_is_tainted_and_stays_tainted_through_input_from() -> None:
    plan = _plan(FETCH, NOTE, {**_fed("noop", "fetch"), "step_id": "copy"}, _fed("noop", "copy"))
    assert tainted(plan) == {"fetch", "copy", "use"}
    assert tainted(_plan(NOTE, _fed("noop", "note"))) == set()


@pytest.mark.parametrize(
    ("kind", "fixed", "into"),
    [
        ("http", None, None),  # the whole input: the URL with it
        ("http", {"url": "http://127.0.0.1:9/x"}, "/url2"),  # not marked as data
        ("http", {"url": "http://127.0.0.1:9/x", "headers": {}}, "/headers/x-a"),
        ("restricted_shell", None, None),
        ("restricted_shell", {"argv": ["ls"]}, "/argv/-"),  # shell args are not data by default
        ("opencode", {"prompt": "fixed"}, "/subgoals"),
        ("opencode", None, None),
    ],
)
def test_an_outside_value_cannot_fill_a_position_that_is_not_data(
    kind: str, fixed: JsonObject | None, into: str | None
) -> None:
    frm = {} if into is None else {"into": into}
    refusal = _refused(_plan(FETCH, _fed(kind, "fetch", fixed, **frm)))
    assert refusal.details["step_id"] == "use" and refusal.details["from"] == "fetch"


def test_data_positions_take_outside_values() -> None:
    post = _fed("http", "fetch", {"url": "http://127.0.0.1:9/x", "method": "POST"}, into="/json")
    check_plan(_plan(FETCH, post), PROFILE)
    check_plan(_plan(FETCH, _fed("noop", "fetch")), PROFILE)
    # untainted sources are not checked at all
    check_plan(_plan(NOTE, _fed("restricted_shell", "note")), PROFILE)


def test_the_never_data_positions_hold_whatever_the_profile_says() -> None:
    generous = PROFILE.model_copy(
        update={
            "tainted_data": {
                DriverKind.HTTP: [""],
                DriverKind.RESTRICTED_SHELL: ["/argv/*"],
                DriverKind.OPENCODE: [""],
            }
        }
    )
    url = _fed("http", "fetch", {"method": "GET"}, into="/url")
    assert _refused(_plan(FETCH, url), generous).details["position"] == "/url"
    program = _fed("restricted_shell", "fetch", {"argv": []}, into="/argv/-")
    assert _refused(_plan(FETCH, program), generous).details["position"] == "/argv/0"
    _refused(_plan(FETCH, _fed("opencode", "fetch")), generous)
    # the profile does open an argument position after the program
    argument = _fed("restricted_shell", "fetch", {"argv": ["cat"]}, pointer="/name", into="/argv/-")
    check_plan(_plan(FETCH, argument), generous)


def test_at_run_time_an_outside_value_may_not_be_a_flag() -> None:
    generous = PROFILE.model_copy(
        update={"tainted_data": {DriverKind.RESTRICTED_SHELL: ["/argv/*"]}}
    )
    plan = _plan(
        FETCH, _fed("restricted_shell", "fetch", {"argv": ["cat"]}, pointer="/name", into="/argv/-")
    )
    step = plan.steps[1]
    for name, ok in (("notes.txt", True), ("--help", False), ("-", False)):
        resolved = resolve_input(step, {"fetch": {"name": name}})
        assert resolved == {"argv": ["cat", name]}
        if ok:
            check_resolved(step, plan, generous, resolved)
        else:
            with pytest.raises(GatehouseError) as info:
                check_resolved(step, plan, generous, resolved)
            assert info.value.code is ErrorCode.TAINTED_INPUT
    assert step.input == {"argv": ["cat"]}  # the approved input is left as it was


def test_into_places_the_value_in_a_copy_of_the_fixed_input() -> None:
    post = PlanStep.model_validate(
        _fed("http", "fetch", {"url": "http://h/x", "json": {"a": 1}}, pointer="/v", into="/json/b")
    )
    assert position(post) == "/json/b"
    assert resolve_input(post, {"fetch": {"v": [1, 2]}}) == {
        "url": "http://h/x",
        "json": {"a": 1, "b": [1, 2]},
    }


@pytest.mark.parametrize("into", ["/json/a", "/nope/x", "/url/x", "/argv/0"])
def test_into_must_name_a_new_key_or_the_end_of_a_list(into: str) -> None:
    fixed: JsonObject = {"url": "http://h/x", "json": {"a": 1}, "argv": ["ls"]}
    step = PlanStep.model_validate(_fed("http", "fetch", fixed, into=into))
    with pytest.raises(GatehouseError) as info:
        position(step)
    assert info.value.code is ErrorCode.PLAN_INVALID


def test_into_needs_a_fixed_input_and_is_left_out_of_digests_when_unset() -> None:
    with pytest.raises(ValueError, match="into"):
        PlanStep.model_validate(_fed("noop", "fetch", None, into="/x"))
    plain = PlanStep.model_validate(_fed("noop", "fetch"))
    dumped = plain.model_dump(mode="json")
    assert dumped["input_from"] == {"step_id": "fetch", "pointer": ""}
    before = {**dumped, "input_from": {"step_id": "fetch", "pointer": ""}}
    assert digest_of(dumped) == digest_of(before)
