"""``gatehouse policy what-if`` over recorded runs, on SQLite and PostgreSQL.

Runs are recorded under the shipped profiles ``guarded`` (Cedar set ``guardrails``)
and ``default`` by two submitters. A proposed policy set is tried on them: the report
names exactly the steps whose decision changes, and they are the steps the gate
itself refuses when each recorded plan is put to it under the proposed rules, for its
submitter. Nothing is written: the database's row counts stand still.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, GatehouseError, Plan
from policies import catalog, cedar_gate
from policies.gate import check_step, gate_plan
from shim.cli import main
from tests.support.stack import Stack, running_stack

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
