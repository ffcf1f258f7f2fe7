"""The pure part of plan repair: refusals as problems, revisions held to the rules."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import ErrorCode, GatehouseError, Plan, digest_of
from policies import catalog
from policies.repair import check_revision, gated_plan, plan_changes, problems_of


def _note(step_id: str, **extra: Any) -> dict[str, Any]:
    base = {"step_id": step_id, "verb": "note", "connector_id": "note", "driver_kind": "noop"}
    return {**base, "input": {"text": step_id}, **extra}


def _plan(*steps: dict[str, Any]) -> Plan:
    return Plan.model_validate({"objective": "o", "steps": list(steps)})


def _digest(plan: Plan) -> str:
    return digest_of(plan.model_dump(mode="json"))


def _revise(previous: Plan, keep: int, ran: list[str]) -> dict[str, Any]:
    return {
        "previous": previous.model_dump(mode="json"),
        "previous_digest": digest_of(previous.model_dump(mode="json")),
        "keep": keep,
        "ran": ran,
    }


def test_a_gate_refusal_becomes_problem_lines() -> None:
    profile, pool = catalog.profile("default").model, catalog.tool_pool("default").model
    with pytest.raises(GatehouseError) as info:
        gated_plan({"objective": "o", "steps": [_note("a", connector_id="nope")]}, profile, pool)
    lines = problems_of(info.value)
    assert lines[0].startswith("unknown_connector:")
    with pytest.raises(GatehouseError) as schema:
        gated_plan({"objective": "o", "steps": "not a list"}, profile, pool)
    assert any(line.startswith("at /steps") for line in problems_of(schema.value))


def test_a_repaired_remainder_keeps_what_ran_and_reports_its_changes() -> None:
    before = _plan(_note("a"), _note("b", on_error="repair"), _note("c"))
    after = _plan(_note("a"), _note("d"))
    changes = check_revision(
        after, digest_of(after.model_dump(mode="json")), _revise(before, 1, ["a", "b"])
    )
    assert {(c["change"], c["step_id"]) for c in changes if isinstance(c, dict)} == {
        ("added", "d"),
        ("removed", "b"),
        ("removed", "c"),
    }


@pytest.mark.parametrize(
    ("after", "why"),
    [
        (_plan(_note("a", input={"text": "changed"}), _note("d")), "changes step 'a'"),
        (_plan(_note("a")), "has 1 step(s)"),
        (_plan(_note("a"), _note("b")), "reuses the step id 'b'"),
    ],
)
def test_a_repair_that_breaks_the_rules_is_refused(after: Plan, why: str) -> None:
    before = _plan(_note("a"), _note("b", on_error="repair"))
    with pytest.raises(GatehouseError) as info:
        check_revision(
            after, digest_of(after.model_dump(mode="json")), _revise(before, 1, ["a", "b"])
        )
    assert info.value.code is ErrorCode.REPAIR_REFUSED
    assert why in info.value.message


def test_a_repair_that_changes_nothing_is_refused() -> None:
    before = _plan(_note("a"), _note("b", on_error="repair"))
    same = digest_of(before.model_dump(mode="json"))
    with pytest.raises(GatehouseError) as info:
        check_revision(before, same, _revise(before, 1, ["a"]))
    assert "is the plan that failed" in info.value.message


def test_plan_changes_names_a_changed_step_and_objective() -> None:
    before = _plan(_note("a"))
    after = Plan.model_validate({"objective": "p", "steps": [_note("a", title="t")]})
    kinds = [c["change"] for c in plan_changes(before, after) if isinstance(c, dict)]
    assert kinds == ["changed", "objective"]
