"""``gatehouse policy what-if`` over recorded runs, on SQLite and PostgreSQL.

Runs are recorded under the shipped profiles ``guarded`` (Cedar set ``guardrails``)
and ``default`` by two submitters. A proposed policy set is tried on them: the report
names exactly the steps whose decision changes, and they are the steps the gate
itself refuses when each recorded plan is put to it under the proposed rules, for its
submitter. Nothing is written: the database's row counts stand still.

Runs that ran (under ``opencode``, a profile no other proposal here reaches; approved
by bob or ann, or left waiting) are decided as they ran: a note that took the first
note's output on that value, and every step they reached with its approver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from contracts import ErrorCode, GatehouseError, Plan, digest_of
from ledger import migrate, open_database, recorded_plans
from policies import catalog, cedar_gate
from policies.gate import check_step, gate_plan
from policies.inputs import resolve_input
from policies.what_if import ran_steps
from shim.cli import main
from tests.support.stack import Stack, drop_database, fresh_database_url, running_stack

URL = "http://127.0.0.1:8000/items"
GUARDRAILS = Path(catalog.__file__).with_name("cedar").joinpath("guardrails.cedar").read_text()
# The proposal: the shipped set, and max may not run shell steps at all.
PROPOSED = (
    GUARDRAILS
    + """
@id("max-no-shell")
forbid (
    principal == Gatehouse::User::"max",
    action == Gatehouse::Action::"restricted_shell",
    resource
);
"""
)


def _http(sid: str, method: str = "GET") -> dict[str, Any]:
    return {
        "step_id": sid,
        "verb": "fetch",
        "connector_id": "local-http",
        "driver_kind": "http",
        "input": {"method": method, "url": URL},
    }


def _shell(sid: str, *argv: str) -> dict[str, Any]:
    return {
        "step_id": sid,
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": list(argv)},
    }


# (profile, submitter, steps): every plan passes the gate of its time
RECORDED: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("guarded", "alice", [_http("read"), _shell("count", "wc", "-l")]),
    ("guarded", "max", [_http("read"), _shell("count", "wc", "-l"), _shell("say", "echo", "hi")]),
    ("guarded", "max", [_http("read")]),
    ("default", "max", [_shell("list", "ls"), _http("write", "POST")]),
    ("default", "alice", [_http("write", "POST")]),
]


@pytest.fixture(scope="module")
def recorded(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, list[str]]]:
    root = tmp_path_factory.mktemp(f"what-if-{backend}")
    with running_stack(backend, root) as stack:
        run_ids: list[str] = []
        for profile, who, steps in RECORDED:
            plan = {"objective": "what-if", "steps": steps}
            body = {
                "recipe": "echo",
                "objective": "what-if",
                "mode": "run-plan",
                "plan": plan,
                "policy_profile": profile,
            }
            r = stack.client.post("/intent", json=body, headers=stack.auth(who))
            assert r.status_code == 202, r.text
            run_ids.append(str(r.json()["run_id"]))
        for run_id in run_ids:
            stack.wait(run_id, {"waiting_approval"})  # its plan card is recorded
        yield stack, run_ids


def _what_if(stack: Stack, *argv: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as ended:
        main(["policy", "what-if", *argv, "--database-url", stack.database_url, "--json"])
    assert ended.value.code == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def _counts(stack: Stack) -> list[Any]:
    tables = ("runs", "plan_cards", "plan_revisions", "policy_versions", "calls")
    return [stack.sql(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables]


def _gate_refusals(stack: Stack, run_ids: list[str], text: str, profile: str | None) -> set[Any]:
    """(run, step, code, policies) the gate itself refuses under the proposed set."""
    rules = cedar_gate.load_policy_set("guardrails", text, [catalog.tool_pool("default").model])
    pool = catalog.tool_pool("default").model
    out: set[Any] = set()
    for run_id in run_ids:
        [(raw, by, under)] = stack.sql(
            "SELECT c.plan_json, r.submitted_by, r.policy_profile FROM plan_cards c"
            " JOIN runs r ON r.run_id = c.run_id WHERE c.run_id = :r",
            r=run_id,
        )
        if under != (profile or "guarded"):
            continue
        plan = Plan.model_validate_json(raw)
        then = catalog.profile(under).model
        proposed = cedar_gate.bound(
            then.model_copy(update={"cedar": "guardrails", "cedar_rules": rules}), by
        )
        gate_plan(plan, pool, cedar_gate.bound(then, by))  # it passed the gate of its time
        whole_plan_refused = False
        for step in plan.steps:
            try:
                check_step(step, step.input, pool, proposed)
            except GatehouseError as exc:
                whole_plan_refused = True
                named = exc.details.get("policy_ids")
                ids = tuple(sorted(str(i) for i in named)) if isinstance(named, list) else ()
                out.add((run_id, step.step_id, exc.code.value, ids))
        try:
            gate_plan(plan, pool, proposed)
        except GatehouseError:
            assert whole_plan_refused
        else:
            assert not whole_plan_refused
    return out


def _reported(report: dict[str, Any]) -> set[Any]:
    return {
        (r["run_id"], c["step_id"], c["code"], tuple(sorted(c["policy_ids"])))
        for r in report["runs"]
        for c in r["changes"]
        if c["change"] == "now_refused"
    }


def test_what_if_reports_exactly_the_changed_decisions(
    recorded: tuple[Stack, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack, run_ids = recorded
    proposed = tmp_path / "guardrails.cedar"
    proposed.write_text(PROPOSED)
    before = _counts(stack)
    report = _what_if(stack, str(proposed), capsys=capsys)
    assert _counts(stack) == before  # read-only

    expected = _gate_refusals(stack, run_ids, PROPOSED, None)
    assert _reported(report) == expected
    # by construction: max's two shell steps under guarded, nothing of alice's
    assert {(r, s) for r, s, _, _ in expected} == {(run_ids[1], "count"), (run_ids[1], "say")}
    assert {c for _, _, c, _ in expected} == {ErrorCode.CEDAR_DENIED.value}
    assert report["runs_read"] >= len(RECORDED)
    assert report["runs_evaluated"] == 3  # the guarded runs: their profile names the set
    assert report["runs_changed"] == 1
    assert report["steps_now_refused"] == 2 and report["steps_newly_allowed"] == 0
    assert report["steps_evaluated"] == 6
    change = report["runs"][0]["changes"][0]
    assert change["policy_ids"] == ["max-no-shell"] and "max-no-shell" in change["reason"]
    assert report["runs"][0]["submitted_by"] == "max"


def test_a_policy_set_tried_on_another_profiles_runs(
    recorded: tuple[Stack, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack, run_ids = recorded
    proposed = tmp_path / "guardrails.cedar"
    proposed.write_text(PROPOSED)
    report = _what_if(stack, str(proposed), "--profile", "default", capsys=capsys)
    expected = _gate_refusals(stack, run_ids, PROPOSED, "default")
    assert _reported(report) == expected
    assert report["runs_evaluated"] == 2
    # both POSTs (http-reads-only) and max's ls (max-no-shell)
    assert sorted((s, p) for _, s, _, p in expected) == [
        ("list", ("max-no-shell",)),
        ("write", ("http-reads-only",)),
        ("write", ("http-reads-only",)),
    ]


def test_todays_rules_change_nothing_and_since_filters(
    recorded: tuple[Stack, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    stack, _ = recorded
    same = _what_if(stack, "guardrails", capsys=capsys)
    assert same["runs_evaluated"] == 3 and same["runs_changed"] == 0 and same["runs"] == []
    later = _what_if(stack, "guardrails", "--since", "2999-01-01", capsys=capsys)
    assert later["runs_read"] == 0


def test_the_table_names_each_changed_step(
    recorded: tuple[Stack, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack, run_ids = recorded
    proposed = tmp_path / "guardrails.cedar"
    proposed.write_text(PROPOSED)
    with pytest.raises(SystemExit) as ended:
        main(["policy", "what-if", str(proposed), "--database-url", stack.database_url])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert run_ids[1] in out and "max-no-shell" in out and "now refused" in out


# -- runs that ran: each step decided on the input it had, with its approver

NOTE: dict[str, Any] = {"verb": "note", "connector_id": "note", "driver_kind": "noop"}
NOTES = [
    {**NOTE, "step_id": "first", "input": {"text": "hello"}},
    # the whole input is the first note's output: outside the approved plan
    {**NOTE, "step_id": "second", "input_from": {"step_id": "first", "pointer": "/echo"}},
]
APPROVERS = ["bob", "ann", None]  # None: left waiting, never ran
PERMIT = '@id("all") permit (principal, action, resource);\n'
# refuses a note only once the outside value it takes is known: right before it runs
ON_RESOLVED = PERMIT + (
    '@id("no-outside-notes") forbid (principal, action == Gatehouse::Action::"noop", resource)'
    " when { context.tainted && context.input_known };\n"
)
NOT_BOB = PERMIT + (
    '@id("not-approved-by-bob") forbid (principal, action, resource)'
    ' when { context has approver && context.approver == Gatehouse::User::"bob" };\n'
)


@pytest.fixture(scope="module")
def ran(recorded: tuple[Stack, list[str]]) -> list[str]:
    """Three runs of NOTES under ``opencode``: approved by bob and by ann (both ran to
    the end), and one left waiting."""
    stack, _ = recorded
    run_ids: list[str] = []
    for approver in APPROVERS:
        plan = {"objective": "what-if ran", "steps": NOTES}
        body = {
            "recipe": "echo",
            "objective": "what-if ran",
            "mode": "run-plan",
            "plan": plan,
            "policy_profile": "opencode",
        }
        r = stack.client.post("/intent", json=body, headers=stack.auth("alice"))
        assert r.status_code == 202, r.text
        run_id = str(r.json()["run_id"])
        card = stack.wait(run_id, {"waiting_approval"})
        if approver is not None:
            ok = stack.client.post(
                f"/approve/{run_id}",
                json={"plan_digest": card["plan_digest"]},
                headers=stack.auth(approver),
            )
            assert ok.status_code == 200, ok.text
            assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
        run_ids.append(run_id)
    stack.settle()
    return run_ids


def _as_it_ran(stack: Stack, run_id: str, text: str) -> set[Any]:
    """(run, step, code, policies) the gate refuses under ``text`` for the opencode
    run ``run_id``: at submit (the plan's own input, no approver) and, for a step the
    run reached, on the input it had (its input_from resolved from the recorded
    outputs) with the approver of its plan."""
    pool = catalog.tool_pool("default").model
    rules = cedar_gate.load_policy_set("proposed", text, [pool])
    [(raw, by)] = stack.sql(
        "SELECT c.plan_json, r.submitted_by FROM plan_cards c JOIN runs r"
        " ON r.run_id = c.run_id WHERE c.run_id = :r",
        r=run_id,
    )
    plan = Plan.model_validate_json(raw)
    approvals = stack.sql(
        "SELECT decided_by FROM plan_approvals WHERE run_id = :r AND decision = 'approved'",
        r=run_id,
    )
    approver = approvals[0][0] if approvals else None
    reached = {
        sid: json.loads(out) if out else None
        for sid, out in stack.sql(
            "SELECT step_id, output_json FROM run_steps WHERE run_id = :r", r=run_id
        )
    }
    outputs = {sid: out for sid, out in reached.items() if isinstance(out, dict)}
    profile = catalog.profile("opencode").model.model_copy(
        update={"cedar": "proposed", "cedar_rules": rules}
    )
    at_submit = cedar_gate.bound(profile, by)
    at_run = cedar_gate.approved(at_submit, approver)
    out: set[Any] = set()
    for step in plan.steps:
        try:
            check_step(step, step.input, pool, at_submit)
            if step.step_id in reached:
                check_step(step, resolve_input(step, outputs), pool, at_run)
        except GatehouseError as exc:
            named = exc.details.get("policy_ids")
            ids = tuple(sorted(str(i) for i in named)) if isinstance(named, list) else ()
            out.add((run_id, step.step_id, exc.code.value, ids))
    return out


def _decided(report: dict[str, Any]) -> set[Any]:
    return {
        (r["run_id"], c["step_id"], c["decided_as"], c["approved_by"])
        for r in report["runs"]
        for c in r["changes"]
    }


def test_a_step_is_decided_on_the_input_it_ran_with(
    recorded: tuple[Stack, list[str]],
    ran: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack, _ = recorded
    by_bob, by_ann, waiting = ran
    proposed = tmp_path / "proposed.cedar"
    proposed.write_text(ON_RESOLVED)
    before = _counts(stack)
    report = _what_if(stack, str(proposed), "--profile", "opencode", capsys=capsys)
    assert _counts(stack) == before  # read-only
    expected = set().union(*(_as_it_ran(stack, r, ON_RESOLVED) for r in ran))
    assert _reported(report) == expected
    # only the value the note ran with is refused: at submit it was not known, and
    # the run left waiting never got that far
    assert expected == {
        (r, "second", ErrorCode.CEDAR_DENIED.value, ("no-outside-notes",)) for r in (by_bob, by_ann)
    }
    assert _decided(report) == {(by_bob, "second", "ran", "bob"), (by_ann, "second", "ran", "ann")}
    assert report["runs_evaluated"] == 3 and report["steps_evaluated"] == 6
    assert report["steps_ran"] == 4 and report["steps_now_refused"] == 2
    assert waiting not in {r["run_id"] for r in report["runs"]}


def test_a_policy_on_who_approved(
    recorded: tuple[Stack, list[str]],
    ran: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack, _ = recorded
    by_bob = ran[0]
    proposed = tmp_path / "proposed.cedar"
    proposed.write_text(NOT_BOB)
    report = _what_if(stack, str(proposed), "--profile", "opencode", capsys=capsys)
    expected = set().union(*(_as_it_ran(stack, r, NOT_BOB) for r in ran))
    assert _reported(report) == expected
    assert {(r, s) for r, s, _, _ in expected} == {(by_bob, "first"), (by_bob, "second")}
    assert _decided(report) == {(by_bob, "first", "ran", "bob"), (by_bob, "second", "ran", "bob")}
    assert report["runs_changed"] == 1
    url = stack.database_url
    with pytest.raises(SystemExit) as ended:
        main(["policy", "what-if", str(proposed), "--profile", "opencode", "--database-url", url])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert by_bob in out and "not-approved-by-bob" in out and "ran" in out and "bob" in out


def test_a_revised_plan_gives_each_step_the_approver_of_its_revision(
    backend: str, tmp_path: Path
) -> None:
    """The ledger's side of a revised plan (as a repair leaves it, written in here):
    every revision with its approver, the earlier ones' plans, what ran."""
    first = {"objective": "revised", "steps": NOTES}
    mended = {**NOTE, "step_id": "mended", "input": {"text": "again"}}
    second = {"objective": "revised", "steps": [NOTES[0], mended]}
    d1, d2 = (digest_of(Plan.model_validate(p).model_dump(mode="json")) for p in (first, second))
    at = "2026-11-27T00:00:00+00:00"
    url = fresh_database_url(backend, tmp_path)
    db = open_database(url)
    try:
        migrate(db)
        writes: list[tuple[str, list[dict[str, Any]]]] = [
            (
                "INSERT INTO intents (intent_id, request_json, request_digest, submitted_by,"
                " created_at) VALUES ('int_1', '{}', :d, 'alice', :t)",
                [{"d": d1, "t": at}],
            ),
            (
                "INSERT INTO runs (run_id, intent_id, recipe, objective, mode, status, phase,"
                " submitted_by, policy_profile, tool_pool, plan_digest, created_at,"
                " updated_at) VALUES ('run_1', 'int_1', 'echo', 'revised', 'run-plan',"
                " 'succeeded', 'done', 'alice', 'opencode', 'default', :d, :t, :t)",
                [{"d": d2, "t": at}],
            ),
            (
                "INSERT INTO plan_cards (run_id, plan_json, plan_digest, status, created_at,"
                " updated_at, revision, previous_digest) VALUES ('run_1', :p, :d,"
                " 'approved', :t, :t, 2, :prev)",
                [{"p": json.dumps(second), "d": d2, "t": at, "prev": d1}],
            ),
            (
                "INSERT INTO plan_revisions (run_id, revision, plan_json, plan_digest,"
                " created_at) VALUES ('run_1', :n, :p, :d, :t)",
                [
                    {"n": 1, "p": json.dumps(first), "d": d1, "t": at},
                    {"n": 2, "p": json.dumps(second), "d": d2, "t": at},
                ],
            ),
            (
                "INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision,"
                " decided_by, decided_at) VALUES (:a, 'run_1', :d, 'approved', :b, :t)",
                [
                    {"a": "apr_1", "d": d1, "b": "bob", "t": at},
                    {"a": "apr_2", "d": d2, "b": "ann", "t": at},
                ],
            ),
            (
                "INSERT INTO run_steps (run_id, step_id, position, driver_kind, connector_id,"
                " status, output_json, finished_at) VALUES ('run_1', :s, :n, 'noop', 'note',"
                " :st, :o, :t)",
                [
                    {"s": "first", "n": 0, "st": "succeeded", "o": '{"echo": {}}', "t": at},
                    {"s": "second", "n": 1, "st": "failed", "o": None, "t": at},
                    {"s": "mended", "n": 1, "st": "succeeded", "o": "{}", "t": at},
                ],
            ),
        ]
        with db.engine.begin() as conn:
            for statement, rows in writes:
                conn.execute(sa.text(statement), rows)
        with db.engine.connect() as conn:
            [run] = list(recorded_plans.recorded_plans(conn, profiles=["opencode"]))
    finally:
        db.dispose()
        drop_database(url)
    assert [(r.plan_digest, r.approved_by) for r in run.revisions] == [(d1, "bob"), (d2, "ann")]
    assert run.revisions[0].plan == Plan.model_validate(first) and run.revisions[1].plan is None
    assert run.steps["first"].output == {"echo": {}} and run.steps["second"].output is None
    found = ran_steps(run)
    assert {sid: r.approved_by for sid, r in found.items()} == {"first": "bob", "mended": "ann"}
