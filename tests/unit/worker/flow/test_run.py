"""The flow, driven through fake ports: every branch of a run, no database, no DBOS.

Each test scripts what the world answers (``tests/support/fake_ports.py``) and
checks what the flow did: the port calls in order, how the run ended, and what
it recorded. Together they pin the flow's behaviour, so it can be moved or split
and shown to do the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts import (
    Budgets,
    Continuation,
    DriverKind,
    ErrorCode,
    GatehouseError,
    IntentJob,
    IntentRequest,
    JsonObject,
    Mode,
    PolicyProfile,
)
from contracts.opa_run import OpaJob
from policies import catalog, cedar_gate
from tests.support.fake_ports import FakePorts, Outcome, failed, ok, planned
from worker.flow import gate_plan, resume_intent, run_intent

RUN = "run_" + "0" * 32
POOL = catalog.tool_pool("default").model
PROFILE = catalog.profile("default").model
OPENCODE_PROFILE = catalog.profile("opencode").model
URL = "http://127.0.0.1:8080/x.json"


def step(step_id: str, connector: str = "note", **extra: Any) -> JsonObject:
    kinds = {
        "note": "noop",
        "local-http": "http",
        "local-http-unkeyed": "http",
        "workspace-shell": "restricted_shell",
        "workspace-opencode": "opencode",
    }
    body: JsonObject = {
        "step_id": step_id,
        "verb": "note",
        "connector_id": connector,
        "driver_kind": kinds[connector],
    }
    if "input_from" not in extra:
        body["input"] = {"text": step_id} if connector == "note" else {"url": URL}
    body.update(extra)
    return body


def plan(*steps: JsonObject) -> JsonObject:
    return {"schema_id": "env.mova_agent_plan_v1", "objective": "test", "steps": list(steps)}


def job(
    *,
    mode: Mode = Mode.FULL_CYCLE,
    supplied: JsonObject | None = None,
    budgets: Budgets | None = None,
    opa: OpaJob | None = None,
    profile: str = "default",
) -> IntentJob:
    request = IntentRequest.model_validate(
        {
            "recipe": "echo",
            "objective": "test the flow",
            "mode": (Mode.RUN_PLAN if supplied is not None else mode).value,
            "plan": supplied,
            "policy_profile": profile,
            "budgets": None if budgets is None else budgets.model_dump(mode="json"),
        }
    )
    return IntentJob(run_id=RUN, intent_id="int_1", request=request, opa=opa)


def ports(*steps: JsonObject, profile: PolicyProfile = PROFILE, **script: Any) -> FakePorts:
    """Fake ports whose planner compiles a plan of ``steps``."""
    planner = script.pop("planner", {"@compile": planned(plan(*steps))})
    return FakePorts(profile=profile, pool=POOL, planner=planner, **script)


def run(fake: FakePorts, the_job: IntentJob | None = None) -> JsonObject:
    return run_intent(the_job or job(), RUN, fake)


def summary(fake: FakePorts) -> list[Any]:
    assert fake.ended is not None
    return list(fake.ended.steps)


# ---------------------------------------------------------------- the way through
def test_a_run_compiles_waits_for_approval_then_runs_each_step_once() -> None:
    fake = ports(step("a"), step("b"))
    out = run(fake)
    assert out["status"] == "succeeded"
    assert fake.log == [
        "begin",
        "planner @compile",
        "card 2 step(s)",
        "await @approval",
        "verify",
        "call a#1",
        "record a (with its call)",
        "call b#1",
        "record b (with its call)",
        "finish succeeded",
    ]
    assert [s["step_id"] for s in summary(fake)] == ["a", "b"]
    assert fake.ended is not None and fake.ended.error_code is None
    # each first attempt checks its own boundary for a cancel before it is claimed
    assert [c["boundary"] for c in fake.sent] == ["a", "b"]


def test_a_supplied_plan_is_not_compiled() -> None:
    fake = ports(step("a"))
    out = run(fake, job(supplied=plan(step("a"))))
    assert out["status"] == "succeeded"
    assert "planner @compile" not in fake.log


def test_plan_only_stops_at_the_plan_card() -> None:
    fake = ports(step("a"))
    out = run(fake, job(mode=Mode.PLAN_ONLY))
    assert out["status"] == "planned"
    assert fake.log == ["begin", "planner @compile", "card 1 step(s)", "finish planned"]


def test_the_trace_digest_is_the_same_for_the_same_run() -> None:
    first, second = ports(step("a"), step("b")), ports(step("a"), step("b"))
    run(first)
    run(second)
    assert first.ended is not None and second.ended is not None
    assert first.ended.trace_digest == second.ended.trace_digest
    other = ports(step("a"), step("c"))
    run(other)
    assert other.ended is not None and other.ended.trace_digest != first.ended.trace_digest


# ---------------------------------------------------------------- before any step
def test_a_run_that_cannot_begin_fails_with_the_reason() -> None:
    fake = ports(step("a"), begin_error=GatehouseError(ErrorCode.UNKNOWN_PROFILE, "no profile 'x'"))
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "unknown_profile")
    assert fake.log == ["begin", "finish failed"]


def test_budgets_wider_than_the_profile_fail_the_run() -> None:
    fake = ports(step("a"))
    out = run(fake, job(budgets=Budgets(max_steps=10_000)))
    assert out["error_code"] == ErrorCode.BUDGET_WIDENED.value
    assert "planner @compile" not in fake.log


def test_a_planner_that_fails_fails_the_run() -> None:
    fake = ports(planner={"@compile": failed(ErrorCode.PLANNER_FAILED, "model said no")})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "planner_failed")
    assert fake.ended is not None and fake.ended.error_message == "model said no"


def test_a_plan_the_gate_refuses_fails_the_run_before_any_decision() -> None:
    fake = ports({**step("a"), "connector_id": "nowhere"})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "unknown_connector")
    assert not any(line.startswith("await") for line in fake.log)


# ---------------------------------------------------------------- decisions
def test_a_rejected_plan_runs_nothing() -> None:
    fake = ports(step("a"), decisions={"@approval": (False, "ann")})
    assert run(fake)["status"] == "rejected"
    assert fake.sent == []


def test_no_decision_in_time_fails_the_run_approval_timeout() -> None:
    fake = ports(step("a"), decisions={"@approval": None})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "approval_timeout")
    assert fake.sent == []


def test_a_plan_changed_after_approval_runs_nothing() -> None:
    fake = ports(step("a"))
    digest = gate_plan(RUN, plan(step("a")), (PROFILE, POOL, Mode.FULL_CYCLE)).plan_digest
    assert digest is not None
    fake.tampered = {digest}
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "plan_tampered")
    assert fake.sent == []


# ---------------------------------------------------------------- cancels
CANCEL: JsonObject = {"cancelled_by": "sam", "reason": "wrong objective", "source": "api"}


@pytest.mark.parametrize(
    ("at", "calls"),
    [("@compile", []), ("@approval", []), ("a", []), ("b", ["a"])],
)
def test_a_cancel_stops_the_run_at_the_boundary_it_is_seen_at(at: str, calls: list[str]) -> None:
    fake = ports(step("a"), step("b"), cancels={at: CANCEL})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("cancelled", "run_cancelled")
    assert [c["step_id"] for c in fake.sent] == calls
    assert fake.ended is not None
    assert fake.ended.error_message == f"cancelled by sam at {at}: wrong objective"


def test_a_cancel_wins_over_the_approval_it_woke() -> None:
    fake = ports(step("a"), cancels={"@approval": CANCEL})
    assert run(fake)["status"] == "cancelled"
    assert "verify" not in fake.log


def test_a_step_a_cancel_cut_off_ends_the_run_there() -> None:
    cut = failed(ErrorCode.RUN_CANCELLED, "aborted, reverted and restored")
    fake = ports(step("a"), step("b"), tools={"a": [cut]}, cancels={"a#cut": CANCEL})
    out = run(fake)
    assert out["status"] == "cancelled"
    assert [c["step_id"] for c in fake.sent] == ["a"]


# ---------------------------------------------------------------- retries
def test_a_call_that_surely_did_not_act_is_sent_again_after_a_seeded_backoff() -> None:
    down = failed(ErrorCode.UPSTREAM_UNAVAILABLE, "connection refused")
    fake = ports(step("get", "local-http"), tools={"get": [down, ok(status=200)]})
    out = run(fake)
    assert out["status"] == "succeeded"
    assert [(c["step_id"], c["attempt"]) for c in fake.sent] == [("get", 1), ("get", 2)]
    assert "boundary" in fake.sent[0] and "boundary" not in fake.sent[1]
    assert summary(fake)[0]["attempts"] == 2
    (pause,) = fake.pauses
    # retry_backoff_s * 2^0 * (0.5 + jitter), jitter in [0, 1)
    assert PROFILE.retry_backoff_s * 0.5 <= pause < PROFILE.retry_backoff_s * 1.5
    again = ports(step("get", "local-http"), tools={"get": [down, ok()]})
    run(again)
    assert again.pauses == fake.pauses  # drawn from the seed, not the clock
    reseeded = ports(step("get", "local-http"), tools={"get": [down, ok()]}, seed="other")
    run(reseeded)
    assert reseeded.pauses != fake.pauses


def test_a_step_still_unavailable_after_max_attempts_fails_the_run() -> None:
    down = failed(ErrorCode.UPSTREAM_UNAVAILABLE, "connection refused")
    fake = ports(step("get", "local-http"), tools={"get": [down]})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "upstream_unavailable")
    assert len(fake.sent) == PROFILE.max_attempts
    assert len(fake.pauses) == PROFILE.max_attempts - 1
    assert fake.log[-2:] == ["record get", "finish failed"]  # recorded after its last try


def test_a_turn_undone_after_a_crash_is_sent_again() -> None:
    undone = failed(ErrorCode.TURN_INTERRUPTED, "the turn was interrupted and undone")
    fake = ports(step("a"), tools={"a": [undone, ok()]})
    assert run(fake)["status"] == "succeeded"
    assert [c["attempt"] for c in fake.sent] == [1, 2]
    assert fake.pauses == []


# ---------------------------------------------------------------- the timeout ladder
def _oc_step(step_id: str = "edit") -> JsonObject:
    return {
        "step_id": step_id,
        "verb": "edit",
        "connector_id": "workspace-opencode",
        "driver_kind": "opencode",
        "input": {"prompt": "add a README"},
    }


def _ladder(outcome: JsonObject) -> list[Any]:
    output = outcome["output"]
    assert isinstance(output, dict)
    ladder = output["ladder"]
    assert isinstance(ladder, list)
    return ladder


def test_a_stalled_turn_is_narrowed_once_then_times_out() -> None:
    stalled = failed(ErrorCode.OC_STALLED, "no events for 30 s", workspace_before="d1")
    fake = ports(_oc_step(), profile=OPENCODE_PROFILE, tools={"edit": [stalled]})
    out = run(fake, job(profile="opencode"))
    assert (out["status"], out["error_code"]) == ("failed", "oc_timeout")
    assert [c.get("narrowed", False) for c in fake.sent] == [False, True]
    (record,) = fake.records
    assert len(_ladder(record.outcome)) == 2


def test_a_stalled_turn_that_recovers_when_narrowed_succeeds_with_its_ladder() -> None:
    stalled = failed(ErrorCode.OC_STALLED, "no events for 30 s")
    fake = ports(_oc_step(), profile=OPENCODE_PROFILE, tools={"edit": [stalled, ok(done=True)]})
    assert run(fake, job(profile="opencode"))["status"] == "succeeded"
    (record,) = fake.records  # an opencode turn's record is written after its call
    assert record.outcome["ok"] is True
    assert len(_ladder(record.outcome)) == 1


def test_an_opencode_turn_is_sent_what_is_left_of_the_budgets() -> None:
    fake = ports(_oc_step(), profile=OPENCODE_PROFILE)
    run(fake, job(profile="opencode"))
    (sent,) = fake.sent
    assert isinstance(sent.get("allowance"), dict)
    assert "record" not in sent


# ---------------------------------------------------------------- calls in doubt
DOUBT = failed(ErrorCode.CALL_IN_DOUBT, "interrupted after it started")


def test_an_in_doubt_call_an_operator_says_took_effect_is_not_sent_again() -> None:
    fake = ports(
        step("post", "local-http-unkeyed"), tools={"post": [DOUBT]}, resolutions={"post": "applied"}
    )
    assert run(fake)["status"] == "succeeded"
    assert len(fake.sent) == 1
    assert "await resolution post" in fake.log
    (record,) = fake.records
    assert record.outcome["output"] == {"resolution": "applied", "op_key": f"{RUN}/post/1"}


def test_an_in_doubt_call_that_did_not_take_effect_is_sent_again_as_a_new_attempt() -> None:
    fake = ports(
        step("post", "local-http-unkeyed"),
        tools={"post": [DOUBT, ok()]},
        resolutions={"post": "not_applied"},
    )
    assert run(fake)["status"] == "succeeded"
    assert [c["attempt"] for c in fake.sent] == [1, 2]


def test_an_in_doubt_call_is_not_sent_again_once_the_run_was_cancelled() -> None:
    fake = ports(
        step("post", "local-http-unkeyed"),
        tools={"post": [DOUBT, ok()]},
        resolutions={"post": "not_applied"},
        cancels={"post#cut": CANCEL},
    )
    assert run(fake)["status"] == "cancelled"
    assert len(fake.sent) == 1


def test_resolutions_are_part_of_the_trace() -> None:
    applied = ports(
        step("post", "local-http-unkeyed"), tools={"post": [DOUBT]}, resolutions={"post": "applied"}
    )
    again = ports(
        step("post", "local-http-unkeyed"),
        tools={"post": [DOUBT, ok()]},
        resolutions={"post": "not_applied"},
    )
    run(applied)
    run(again)
    assert applied.ended is not None and again.ended is not None
    assert applied.ended.trace_digest != again.ended.trace_digest


# ---------------------------------------------------------------- failures and on_error
def test_a_soft_failure_of_a_continue_step_lets_the_run_go_on() -> None:
    fake = ports(
        step("a", on_error="continue"),
        step("b"),
        tools={"a": [failed(ErrorCode.HANDLER_FAILED, "exit 1")]},
    )
    assert run(fake)["status"] == "succeeded"
    assert [(s["step_id"], s["ok"]) for s in summary(fake)] == [("a", False), ("b", True)]


def test_a_hard_failure_ends_the_run_whatever_on_error_says() -> None:
    refused = failed(ErrorCode.DESTINATION_NOT_ALLOWED, "resolved to a private address")
    fake = ports(step("a", on_error="continue"), step("b"), tools={"a": [refused]})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "destination_not_allowed")
    assert [c["step_id"] for c in fake.sent] == ["a"]


def test_a_fatal_step_failure_ends_the_run() -> None:
    fake = ports(step("a"), step("b"), tools={"a": [failed(ErrorCode.HANDLER_FAILED, "boom")]})
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "handler_failed")
    assert fake.ended is not None and fake.ended.error_message == "boom"


def test_an_input_that_cannot_be_resolved_is_refused_before_the_call() -> None:
    later = step("b", input_from={"step_id": "a", "pointer": "/missing"})
    fake = ports(step("a"), later, tools={"a": [ok(found="x")]})
    out = run(fake)
    assert out["error_code"] == ErrorCode.INPUT_RESOLUTION_FAILED.value
    assert [c["step_id"] for c in fake.sent] == ["a"]
    assert [r.step_id for r in fake.records] == ["b"]  # the refusal is recorded, nothing called


def test_an_earlier_output_becomes_a_later_input() -> None:
    later = step("b", input_from={"step_id": "a", "pointer": "/note"})
    fake = ports(step("a"), later, tools={"a": [ok(note={"text": "from a"})]})
    assert run(fake)["status"] == "succeeded"
    assert fake.sent[1]["input"] == {"text": "from a"}


# ---------------------------------------------------------------- outside data, decided on
REVIEWING = PROFILE.model_copy(
    update={"approval": PROFILE.approval.model_copy(update={"reapprove_outside_data": True})}
)


def fetched_then_noted() -> tuple[JsonObject, JsonObject]:
    """An http GET (outside data), then a note whose whole input is the body it got."""
    return step("get", "local-http"), step("b", input_from={"step_id": "get", "pointer": "/note"})


def test_outside_data_is_decided_on_once_its_value_exists() -> None:
    first, later = fetched_then_noted()
    fake = ports(first, later, profile=REVIEWING, tools={"get": [ok(note={"text": "from"})]})
    assert run(fake)["status"] == "succeeded"
    assert fake.log == [
        "begin",
        "planner @compile",
        "card 2 step(s)",
        "await @approval",
        "verify",
        "call get#1",
        "record get (with its call)",
        "card 2 step(s)",
        "await @approval-data-b",
        "verify",
        "call b#1",
        "record b (with its call)",
        "finish succeeded",
    ]
    (approved, revision) = fake.cards
    assert (revision.previous_digest, revision.outside_data) == (approved.plan_digest, "b")
    assert approved.plan is not None and revision.plan is not None
    # the approved plan named only where it comes from; the revision holds the value
    assert approved.plan.steps[1].input_from is not None
    assert revision.plan.steps[1].input_from is None
    assert revision.plan.steps[1].input == {"text": "from"}
    assert fake.sent[1]["input"] == {"text": "from"}


def test_outside_data_a_person_rejects_is_never_sent() -> None:
    first, later = fetched_then_noted()
    fake = ports(
        first,
        later,
        profile=REVIEWING,
        tools={"get": [ok(note={"text": "rm -rf"})]},
        decisions={"@approval-data-b": (False, "ann")},
    )
    assert run(fake)["status"] == "rejected"
    assert [c["step_id"] for c in fake.sent] == ["get"]


def test_outside_data_is_only_rechecked_unless_the_profile_asks() -> None:
    first, later = fetched_then_noted()
    fake = ports(first, later, tools={"get": [ok(note={"text": "from"})]})
    assert run(fake)["status"] == "succeeded"
    assert len(fake.cards) == 1 and "await @approval-data-b" not in fake.log


def test_an_earlier_output_of_the_plan_itself_is_not_outside_data() -> None:
    later = step("b", input_from={"step_id": "a", "pointer": "/note"})
    fake = ports(step("a"), later, profile=REVIEWING, tools={"a": [ok(note={"text": "x"})]})
    assert run(fake)["status"] == "succeeded"
    assert len(fake.cards) == 1


def test_an_outside_value_that_does_not_resolve_ends_the_run_before_any_revision() -> None:
    first = step("get", "local-http")
    later = step("b", input_from={"step_id": "get", "pointer": "/cmd"}, connector="note")
    fake = ports(first, later, profile=REVIEWING, tools={"get": [ok(cmd="not an object")]})
    out = run(fake)
    assert out["error_code"] == ErrorCode.INPUT_RESOLUTION_FAILED.value
    assert len(fake.cards) == 1


# ---------------------------------------------------------------- Cedar
def test_cedar_decides_each_step_knowing_who_approved_its_plan() -> None:
    text = (
        '@id("all") permit (principal, action, resource);\n'
        '@id("notes-need-olga")\n'
        'forbid (principal, action == Gatehouse::Action::"noop", resource)\n'
        'when { context has approver && context.approver != Gatehouse::User::"olga" };\n'
    )
    rules = cedar_gate.load_policy_set("notes", text, [POOL])
    profile = PROFILE.model_copy(update={"cedar": "notes", "cedar_rules": rules})
    fake = ports(step("a"), profile=profile)  # approved by ann
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", ErrorCode.CEDAR_DENIED.value)
    assert fake.sent == []
    fake = ports(step("a"), profile=profile, decisions={"@approval": (True, "olga")})
    assert run(fake)["status"] == "succeeded"


# ---------------------------------------------------------------- budgets
def test_a_call_that_would_cross_the_step_budget_is_not_made() -> None:
    fake = ports(step("a"), step("b"))
    out = run(fake, job(budgets=Budgets(max_steps=1)))
    assert (out["status"], out["error_code"]) == ("failed", "budget_exceeded")
    assert [c["step_id"] for c in fake.sent] == ["a"]
    assert fake.ended is not None and fake.ended.budgets is not None


def test_a_model_call_that_spends_past_the_token_budget_ends_the_run() -> None:
    costly = planned(plan(step("a")), model="scripted", prompt_tokens=900, completion_tokens=200)
    fake = ports(planner={"@compile": costly})
    out = run(fake, job(budgets=Budgets(max_tokens=1000)))
    assert (out["status"], out["error_code"]) == ("failed", "budget_exceeded")
    assert fake.cards == []  # ended before its plan was carded


def test_backoffs_count_against_the_wall_budget() -> None:
    down = failed(ErrorCode.UPSTREAM_UNAVAILABLE, "connection refused")
    fake = ports(step("get", "local-http"), tools={"get": [down, down, ok()]})
    run(fake)
    assert fake.ended is not None and fake.ended.budgets is not None
    used = fake.ended.budgets["used"]
    assert isinstance(used, dict)
    calls_s = 4 * 10 / 1000  # the compile and three attempts, 10 ms each
    assert used["wall_s"] == pytest.approx(calls_s + sum(fake.pauses), abs=0.002)


# ---------------------------------------------------------------- plan repair
def test_a_compiled_plan_the_gate_would_refuse_gets_one_repair_call() -> None:
    bad = plan({**step("a"), "connector_id": "nowhere"})
    fake = ports(
        planner={"@compile": planned(bad), "@repair": planned(plan(step("a")))},
        planner_target="openai_compat",
    )
    assert run(fake)["status"] == "succeeded"
    assert [a.get("call_id", "@compile") for a in fake.asked] == ["@compile", "@repair"]
    repair = fake.asked[1]["repair"]
    assert isinstance(repair, dict) and repair["reason"] == "refused"


def test_a_template_planner_is_never_asked_to_repair() -> None:
    bad = plan({**step("a"), "connector_id": "nowhere"})
    fake = ports(planner={"@compile": planned(bad)})
    assert run(fake)["error_code"] == "unknown_connector"
    assert len(fake.asked) == 1


def test_a_soft_failure_of_a_repair_step_asks_for_a_new_remainder_and_a_new_approval() -> None:
    first = plan(step("a"), step("b", on_error="repair"), step("c"))
    mended = plan(step("a"), step("b2"), step("c"))
    fake = ports(
        planner={"@compile": planned(first), "@repair-1": planned(mended)},
        planner_target="openai_compat",
        tools={"b": [failed(ErrorCode.HANDLER_FAILED, "exit 2")]},
    )
    assert run(fake)["status"] == "succeeded"
    assert [c["step_id"] for c in fake.sent] == ["a", "b", "b2", "c"]
    # (the label counts the repair calls asked for, so the first remainder is "-2")
    assert "await @approval-2" in fake.log
    (approved, revision) = fake.cards
    assert revision.repaired and revision.previous_digest == approved.plan_digest
    assert revision.plan is not None
    assert [s.step_id for s in revision.plan.steps] == ["a", "b2", "c"]


def test_a_repaired_remainder_can_be_rejected() -> None:
    first = plan(step("a", on_error="repair"))
    mended = plan(step("a2"))
    fake = ports(
        planner={"@compile": planned(first), "@repair-1": planned(mended)},
        planner_target="openai_compat",
        tools={"a": [failed(ErrorCode.HANDLER_FAILED, "exit 2")]},
        decisions={"@approval-2": (False, "ann")},
    )
    assert run(fake)["status"] == "rejected"


def test_with_no_repaired_plan_the_failure_stands() -> None:
    first = plan(step("a", on_error="repair"))
    fake = ports(
        planner={"@compile": planned(first)},
        planner_target="openai_compat",
        tools={"a": [failed(ErrorCode.HANDLER_FAILED, "exit 2")]},
    )
    out = run(fake)
    assert (out["status"], out["error_code"]) == ("failed", "handler_failed")
    assert fake.ended is not None and "no repair" in (fake.ended.error_message or "")


def out_of_repairs() -> FakePorts:
    """A run whose every plan fails its one step and asks for a repair."""
    return ports(
        planner={
            "@compile": planned(plan(step("a", on_error="repair"))),
            "@repair-1": planned(plan(step("a1", on_error="repair"))),
            "@repair-2": planned(plan(step("a2", on_error="repair"))),
        },
        planner_target="openai_compat",
        tools={s: [failed(ErrorCode.HANDLER_FAILED, "no")] for s in ("a", "a1", "a2")},
    )


def test_a_run_asks_for_at_most_two_remainders() -> None:
    fake = out_of_repairs()
    out = run(fake)
    assert out["status"] == "failed"
    assert [a.get("call_id", "@compile") for a in fake.asked] == [
        "@compile",
        "@repair-1",
        "@repair-2",
    ]
    assert fake.ended is not None and "already asked for 2 repairs" in (
        fake.ended.error_message or ""
    )


# ---------------------------------------------------------------- interactive sessions
INTERACTIVE = OpaJob(
    archive_name="a.opa",
    archive_sha256="a" * 64,
    opa_version="0.1",
    execution_mode="interactive",
)


def test_an_interactive_run_goes_on_with_each_message_as_a_new_approved_turn() -> None:
    fake = ports(
        step("a"),
        planner={
            "@compile": planned(plan(step("a"))),
            "@compile-2": planned(plan(step("a"), step("more"))),
        },
        messages={1: {"text": "one more thing", "ends": False}},
    )
    out = run(fake, job(opa=INTERACTIVE))
    assert out["status"] == "succeeded"
    # the planner's "a" of turn 2 is renamed: a new step never meets an earlier one's ledger
    assert [c["step_id"] for c in fake.sent] == ["a", "t2-a", "more"]
    assert "await @approval-turn-2" in fake.log
    assert fake.log[-2:] == ["await @input-2", "finish succeeded"]
    objective = fake.asked[1]["objective"]
    assert isinstance(objective, str) and objective.endswith("### follow-up 1\none more thing")
    assert fake.ended is not None and fake.ended.follow_ups == [
        {"turn": 1, "text": "one more thing", "after_step": 1}
    ]


def test_an_interactive_session_ends_on_a_message_that_says_so() -> None:
    fake = ports(step("a"), messages={1: {"text": "thanks", "ends": True}})
    assert run(fake, job(opa=INTERACTIVE))["status"] == "succeeded"
    assert fake.ended is not None and fake.ended.follow_ups == []


def test_a_cancel_while_an_interactive_run_waits_for_input_ends_it() -> None:
    fake = ports(
        step("a"), messages={1: {"text": "go on", "ends": False}}, cancels={"@input-1": CANCEL}
    )
    assert run(fake, job(opa=INTERACTIVE))["status"] == "cancelled"
    assert [a.get("call_id", "@compile") for a in fake.asked] == ["@compile"]


def test_a_batch_run_does_not_wait_for_messages() -> None:
    batch = INTERACTIVE.model_copy(update={"execution_mode": "batch"})
    fake = ports(step("a"), messages={1: {"text": "ignored", "ends": False}})
    assert run(fake, job(opa=batch))["status"] == "succeeded"
    assert not any(line.startswith("await @input") for line in fake.log)


# ---------------------------------------------------------------- what steps are sent
def test_shell_steps_carry_the_profile_s_sandbox_rule_only_when_it_allows() -> None:
    argv: JsonObject = {"argv": ["ls", "-l"]}
    shell: JsonObject = {**step("ls", "workspace-shell"), "input": argv}
    fake = ports(shell)
    run(fake)
    assert "unsandboxed_shell" not in fake.sent[0]
    loose = PROFILE.model_copy(update={"unsandboxed_shell": "allowed"})
    fake = ports(shell, profile=loose)
    run(fake)
    assert fake.sent[0]["unsandboxed_shell"] == "allowed"
    assert fake.sent[0]["driver_kind"] == DriverKind.RESTRICTED_SHELL.value


def test_each_step_is_sent_what_its_record_needs() -> None:
    fake = ports(step("a"))
    run(fake)
    record = fake.sent[0]["record"]
    assert isinstance(record, dict)
    assert record["connector_id"] == "note"
    assert isinstance(record["spent"], dict)
    assert isinstance(Outcome().response(), dict)


def test_a_cancel_wins_over_a_step_the_policy_refuses_at_its_boundary() -> None:
    later = step("b", input_from={"step_id": "a", "pointer": "/missing"})
    fake = ports(step("a"), later, cancels={"b": CANCEL})
    assert run(fake)["status"] == "cancelled"
    assert fake.records == []


# ---------------------------------------------------------------- from a continuation
def _scripts() -> dict[str, tuple[FakePorts, IntentJob]]:
    """Runs that pass each kind of decision, each scripted the same way twice."""
    first, later = fetched_then_noted()
    repaired = {
        "@compile": planned(plan(step("a"), step("b", on_error="repair"), step("c"))),
        "@repair-1": planned(plan(step("a"), step("b2"), step("c"))),
    }
    b_fails: dict[str, Any] = {
        "planner": repaired,
        "planner_target": "openai_compat",
        "tools": {"b": [failed(ErrorCode.HANDLER_FAILED, "exit 2")]},
    }
    turns = {
        "@compile": planned(plan(step("a"))),
        "@compile-2": planned(plan(step("a"), step("more"))),
    }
    return {
        "plain": (ports(step("a"), step("b")), job()),
        "outside data": (
            ports(first, later, profile=REVIEWING, tools={"get": [ok(note={"text": "from"})]}),
            job(),
        ),
        "repair": (ports(**b_fails), job()),
        "repair rejected": (ports(**b_fails, decisions={"@approval-2": (False, "ann")}), job()),
        "repair that reads an output": (
            ports(
                planner={
                    "@compile": planned(plan(step("a"), step("b", on_error="repair"))),
                    "@repair-1": planned(
                        plan(step("a"), step("b2", input_from={"step_id": "a", "pointer": "/note"}))
                    ),
                },
                planner_target="openai_compat",
                tools={
                    "a": [ok(note={"text": "from a"})],
                    "b": [failed(ErrorCode.HANDLER_FAILED, "exit 2")],
                },
            ),
            job(),
        ),
        "repairs run out": (out_of_repairs(), job()),
        "next turn": (
            ports(step("a"), planner=turns, messages={1: {"text": "one more", "ends": False}}),
            job(opa=INTERACTIVE),
        ),
    }


@pytest.mark.parametrize("name", list(_scripts()))
def test_a_run_resumed_from_any_decision_s_continuation_ends_as_the_whole_run_does(
    name: str,
) -> None:
    whole, the_job = _scripts()[name]
    run(whole, the_job)
    assert whole.ended is not None and whole.continuations, whole.log
    for at, then in whole.continuations.items():
        # through JSON, as the park writes it and the next stretch's job carries it
        kept = Continuation.model_validate_json(then.model_dump_json())
        assert kept == then
        resumed, _ = _scripts()[name]
        resume_intent(kept, RUN, resumed)
        assert resumed.ended is not None, (at, resumed.log)
        # nothing before the decision again: it starts at the wait and sends only what
        # came after it in the whole run, and it ends with the same record
        assert resumed.log[0] == f"await {at}", resumed.log
        assert whole.log[-len(resumed.log) :] == resumed.log, at
        assert whole.sent[len(whole.sent) - len(resumed.sent) :] == resumed.sent, at
        assert resumed.ended == whole.ended, at
