"""policies.what_if without a database: the rules of a run's time are the versions it
recorded (kept by digest), changes go both ways, and a run whose rules are neither in
force nor kept is skipped, not judged by others. A step the run reached is decided on
the input it had and with the approver of the revision it ran under; one it never
reached, as at submit."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import (
    ErrorCode,
    GatehouseError,
    Plan,
    RecordedPlan,
    RecordedRevision,
    RecordedStep,
    sha256_hex,
)
from policies import catalog
from policies.cedar_gate import load_policy_set
from policies.what_if import Proposal, RulesOfTheirTime, ran_steps, what_if

POOL = catalog.tool_pool("default")
GUARDED = catalog.profile("guarded")
PERMIT = '@id("all") permit (principal, action, resource);\n'
NO_SHELL = PERMIT + (
    '@id("no-shell") forbid (principal, action == Gatehouse::Action::"restricted_shell",'
    " resource);\n"
)


def _plan() -> Plan:
    steps: list[dict[str, Any]] = [
        {
            "step_id": "read",
            "verb": "fetch",
            "connector_id": "local-http",
            "driver_kind": "http",
            "input": {"method": "GET", "url": "http://127.0.0.1:8000/x"},
        },
        {
            "step_id": "count",
            "verb": "run",
            "connector_id": "workspace-shell",
            "driver_kind": "restricted_shell",
            "input": {"argv": ["wc", "-l"]},
        },
    ]
    return Plan.model_validate({"objective": "w", "steps": steps})


def _run(run_id: str, cedar_digest: str | None, profile: str = "guarded") -> RecordedPlan:
    return RecordedPlan(
        run_id=run_id,
        created_at="2026-11-27T00:00:00+00:00",
        submitted_by="alice",
        policy_profile=profile,
        tool_pool="default",
        profile_digest=GUARDED.digest,
        tool_pool_digest=POOL.digest,
        cedar_digest=cedar_digest,
        plan=_plan(),
    )


def test_changes_both_ways_against_the_set_each_run_ran_under() -> None:
    strict = load_policy_set("guardrails", NO_SHELL, [POOL.model])
    loose = load_policy_set("guardrails", PERMIT, [POOL.model])
    kept = {strict.digest: ("guardrails", strict.text), loose.digest: ("guardrails", loose.text)}
    runs = [_run("under-strict", strict.digest), _run("under-loose", loose.digest)]
    report = what_if(runs, Proposal(cedar=loose), RulesOfTheirTime(kept), loose.digest)
    assert report.runs_evaluated == 2 and report.runs_changed == 1
    [changed] = report.runs
    assert changed.run_id == "under-strict"
    [change] = changed.changes
    assert (change.step_id, change.change, change.code) == (
        "count",
        "newly_allowed",
        "cedar_denied",
    )
    assert change.policy_ids == ["no-shell"]
    report = what_if(runs, Proposal(cedar=strict), RulesOfTheirTime(kept), strict.digest)
    assert [r.run_id for r in report.runs] == ["under-loose"]
    assert report.steps_now_refused == 1 and report.steps_newly_allowed == 0


def test_a_run_whose_rules_are_gone_is_skipped() -> None:
    proposal = Proposal(cedar=load_policy_set("guardrails", NO_SHELL, [POOL.model]))
    body = GUARDED.text.replace('"guarded"', '"retired"')
    digest = sha256_hex(body.encode("utf-8"))
    gone = _run("gone", None, profile="retired").model_copy(update={"profile_digest": digest})
    report = what_if([gone], proposal, RulesOfTheirTime({}), "0" * 64)
    assert report.runs_read == 1 and report.runs_skipped == 1 and report.runs_evaluated == 0
    # kept by its digest, it is judged by that version
    kept = {digest: ("retired", body)}
    report = what_if(
        [gone], Proposal(cedar=proposal.cedar, for_profile="retired"), RulesOfTheirTime(kept), "x"
    )
    assert report.runs_skipped == 0 and report.runs_changed == 1


@pytest.mark.parametrize("kept_body", ["{not json", "the body of another version"])
def test_a_kept_version_that_is_corrupt_is_refused_as_in_a_replay(kept_body: str) -> None:
    """A kept body that does not load, or no longer has the digest it is kept by, is
    refused (``corrupt_record``), never judged by today's file in its place."""
    digest = sha256_hex(kept_body.encode("utf-8")) if kept_body.startswith("{") else "1" * 64
    run = _run("r", None).model_copy(update={"profile_digest": digest})
    proposal = Proposal(cedar=load_policy_set("guardrails", NO_SHELL, [POOL.model]))
    with pytest.raises(GatehouseError) as refused:
        what_if([run], proposal, RulesOfTheirTime({digest: ("guarded", kept_body)}), "x")
    assert refused.value.code is ErrorCode.CORRUPT_RECORD


def test_a_profile_proposal_applies_to_its_own_runs_only() -> None:
    default = catalog.profile("default").model
    report = what_if(
        [_run("g", GUARDED.model.cedar_rules.digest if GUARDED.model.cedar_rules else None)],
        Proposal(profile=default),
        RulesOfTheirTime({}),
        "d" * 64,
    )
    assert report.runs_read == 1 and report.runs_evaluated == 0


# -- as the run decided: a step it reached, on its resolved input and with its approver

NOTE: dict[str, Any] = {"verb": "note", "connector_id": "note", "driver_kind": "noop"}
# a noop that takes an earlier step's output is refused once that value is known
ON_RESOLVED = PERMIT + (
    '@id("no-outside-notes") forbid (principal, action == Gatehouse::Action::"noop", resource)'
    " when { context.tainted && context.input_known };\n"
)
NOT_BOB = PERMIT + (
    '@id("not-approved-by-bob") forbid (principal, action, resource)'
    ' when { context has approver && context.approver == Gatehouse::User::"bob" };\n'
)


def _notes() -> Plan:
    steps: list[dict[str, Any]] = [
        {**NOTE, "step_id": "first", "input": {"text": "hi"}},
        {**NOTE, "step_id": "second", "input_from": {"step_id": "first", "pointer": "/echo"}},
    ]
    return Plan.model_validate({"objective": "notes", "steps": steps})


def _ran(
    run_id: str,
    rules: str | None,
    *,
    reached: dict[str, RecordedStep] | None = None,
    approved_by: str | None = "bob",
) -> RecordedPlan:
    return _run(run_id, rules).model_copy(
        update={
            "plan": _notes(),
            "steps": reached or {},
            "revisions": [RecordedRevision(plan_digest="d" * 64, approved_by=approved_by)],
        }
    )


BOTH_RAN = {
    "first": RecordedStep(status="succeeded", output={"echo": {"text": "hi"}}),
    "second": RecordedStep(status="succeeded", output={"echo": {"text": "hi"}}),
}


def _rules(*texts: str) -> tuple[list[Any], RulesOfTheirTime]:
    sets = [load_policy_set("guardrails", t, [POOL.model]) for t in texts]
    return sets, RulesOfTheirTime({s.digest: ("guardrails", s.text) for s in sets})


def test_a_step_that_ran_is_decided_on_the_input_it_had() -> None:
    (loose, strict), kept = _rules(PERMIT, ON_RESOLVED)
    ran = _ran("ran", loose.digest, reached=BOTH_RAN)
    never = _ran("never", loose.digest)  # waiting: its steps never ran
    report = what_if([ran, never], Proposal(cedar=strict), kept, strict.digest)
    assert report.steps_evaluated == 4 and report.steps_ran == 2
    [changed] = report.runs
    assert changed.run_id == "ran"
    [change] = changed.changes
    assert (change.step_id, change.change, change.decided_as, change.approved_by) == (
        "second",
        "now_refused",
        "ran",
        "bob",
    )
    assert change.policy_ids == ["no-outside-notes"]
    # as at submit alone, nothing changes: the value was not known then
    assert what_if([never], Proposal(cedar=strict), kept, strict.digest).runs_changed == 0


def test_the_approver_is_whoever_approved_the_plan_it_ran_under() -> None:
    (loose, strict), kept = _rules(PERMIT, NOT_BOB)
    runs = [
        _ran("by-bob", loose.digest, reached=BOTH_RAN),
        _ran("by-ann", loose.digest, reached=BOTH_RAN, approved_by="ann"),
        _ran("waiting", loose.digest),
    ]
    report = what_if(runs, Proposal(cedar=strict), kept, strict.digest)
    [changed] = report.runs
    assert changed.run_id == "by-bob"
    assert [(c.step_id, c.decided_as, c.approved_by) for c in changed.changes] == [
        ("first", "ran", "bob"),
        ("second", "ran", "bob"),
    ]
    assert {tuple(c.policy_ids) for c in changed.changes} == {("not-approved-by-bob",)}


def test_a_step_refused_right_before_it_ran_is_newly_allowed_on_that_input() -> None:
    (loose, strict), kept = _rules(PERMIT, ON_RESOLVED)
    refused = {
        "first": BOTH_RAN["first"],
        "second": RecordedStep(status="failed", output=None),
    }
    report = what_if(
        [_ran("refused", strict.digest, reached=refused)], Proposal(cedar=loose), kept, "x"
    )
    [change] = report.runs[0].changes
    assert (change.step_id, change.change, change.code, change.decided_as) == (
        "second",
        "newly_allowed",
        "cedar_denied",
        "ran",
    )


def test_a_step_whose_input_did_not_resolve_keeps_the_decision_at_submit() -> None:
    (loose, strict), kept = _rules(PERMIT, ON_RESOLVED)
    failed_first = {
        "first": RecordedStep(status="failed", output=None),
        "second": RecordedStep(status="failed", output=None),
    }
    run = _ran("no-input", loose.digest, reached=failed_first)
    assert set(ran_steps(run)) == {"first"}
    report = what_if([run], Proposal(cedar=strict), kept, strict.digest)
    assert report.runs_changed == 0 and report.steps_ran == 1


def test_each_step_has_the_approver_of_the_revision_it_ran_under() -> None:
    revised = Plan.model_validate(
        {
            "objective": "notes",
            "steps": [
                {**NOTE, "step_id": "first", "input": {"text": "hi"}},
                {**NOTE, "step_id": "mended", "input": {"text": "again"}},
            ],
        }
    )
    run = _ran("revised", None, reached=BOTH_RAN).model_copy(
        update={
            "plan": revised,
            "steps": {**BOTH_RAN, "mended": RecordedStep(status="succeeded", output={})},
            "revisions": [
                RecordedRevision(plan_digest="1" * 64, approved_by="bob", plan=_notes()),
                RecordedRevision(plan_digest="2" * 64, approved_by="ann"),
            ],
        }
    )
    found = ran_steps(run)
    assert {sid: r.approved_by for sid, r in found.items()} == {"first": "bob", "mended": "ann"}
    assert found["mended"].input == {"text": "again"}
