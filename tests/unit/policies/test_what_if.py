"""policies.what_if without a database: the rules of a run's time are the versions it
recorded (kept by digest), changes go both ways, and a run whose rules are neither in
force nor kept is skipped, not judged by others."""

from __future__ import annotations

from typing import Any

from contracts import Plan, RecordedPlan
from policies import catalog
from policies.cedar_gate import load_policy_set
from policies.what_if import Proposal, RulesOfTheirTime, what_if

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
    gone = _run("gone", None, profile="retired").model_copy(update={"profile_digest": "0" * 64})
    report = what_if([gone], proposal, RulesOfTheirTime({}), "0" * 64)
    assert report.runs_read == 1 and report.runs_skipped == 1 and report.runs_evaluated == 0
    # kept by its digest, it is judged by that version
    kept = {"0" * 64: ("retired", GUARDED.text.replace('"guarded"', '"retired"'))}
    report = what_if(
        [gone], Proposal(cedar=proposal.cedar, for_profile="retired"), RulesOfTheirTime(kept), "x"
    )
    assert report.runs_skipped == 0 and report.runs_changed == 1


def test_a_profile_proposal_applies_to_its_own_runs_only() -> None:
    default = catalog.profile("default").model
    report = what_if(
        [_run("g", GUARDED.model.cedar_rules.digest if GUARDED.model.cedar_rules else None)],
        Proposal(profile=default),
        RulesOfTheirTime({}),
        "d" * 64,
    )
    assert report.runs_read == 1 and report.runs_evaluated == 0
