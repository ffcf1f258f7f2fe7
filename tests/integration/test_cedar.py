"""Cedar in the gate, on SQLite and PostgreSQL.

A profile (an operator's own, ``GATEHOUSE_EXTRA_POLICIES``) names a Cedar policy set
that forbids the word "secret" as a shell argument. A plan that says it outright is
refused at submit with ``cedar_denied``, nothing stored. A plan that takes the word
from an earlier step's output passes the gate at submit (the argument is not known
yet) and is refused again right before the step, at run time. A run replays under
the policy set of its time after the file changed; held to today's, the replay
reports the change. A policy set naming an entity that does not exist stops the
catalog from loading.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import open_database
from policies import catalog
from tests.support.extra_policies import extra_policies, write_profile
from tests.support.plans import digest_of_plan
from tests.support.stack import Stack, running_stack
from worker.replay import replay_run
from worker.runtime import runtime

PROFILE = "cedar-test"
POLICIES = """
@id("permit-all") permit (principal, action, resource);

@id("no-secret-words")
forbid (principal, action == Gatehouse::Action::"restricted_shell", resource)
when { context has args && context.args.contains("secret") };
"""
# The policy set as edited after a run: notes are refused too.
EDITED = (
    POLICIES
    + """
@id("no-notes") forbid (principal, action == Gatehouse::Action::"noop", resource);
"""
)


@pytest.fixture(scope="module")
def cedar_root(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, Path]]:
    root = tmp_path_factory.mktemp(f"cedar-{backend}")
    policies = root / "policies"
    # an earlier step's output may become a shell argument (never the program)
    tainted = {"noop": [""], "http": ["/json"], "restricted_shell": ["/argv/1"]}
    write_profile(policies, PROFILE, cedar=PROFILE, tainted_data=tainted)
    (policies / "cedar").mkdir(parents=True)
    cedar_file = policies / "cedar" / f"{PROFILE}.cedar"
    cedar_file.write_text(POLICIES)
    (root / "stack").mkdir()
    with extra_policies(policies):
        try:
            with running_stack(backend, root / "stack") as stack:
                yield stack, cedar_file
        finally:
            cedar_file.write_text(POLICIES)


def _note(step_id: str, word: str) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"word": word},
    }


def _echo(step_id: str, argv: list[str], **more: Any) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": argv},
        **more,
    }


def _submit(stack: Stack, *steps: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    plan = {"objective": "cedar", "steps": list(steps)}
    body = {
        "recipe": "echo",
        "objective": "cedar",
        "mode": "run-plan",
        "plan": plan,
        "policy_profile": PROFILE,
    }
    return stack.submit(body), plan


def _approved(stack: Stack, *steps: dict[str, Any]) -> dict[str, Any]:
    r, plan = _submit(stack, *steps)
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    assert ok.status_code == 200, ok.text
    return stack.wait(run_id, {"succeeded", "failed"})


def test_a_cedar_deny_refuses_at_submit(cedar_root: tuple[Stack, Path]) -> None:
    stack, _ = cedar_root
    before = stack.sql("SELECT COUNT(*) FROM runs")[0][0]
    r, _ = _submit(stack, _echo("say", ["echo", "secret"]))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "cedar_denied"
    assert "no-secret-words" in error["message"]
    assert stack.sql("SELECT COUNT(*) FROM runs")[0][0] == before  # nothing stored
    # the refusal is a security event: a policy violation
    events = stack.sql(
        "SELECT category, severity FROM security_events WHERE error_code = 'cedar_denied'"
    )
    assert ("policy_violation", "high") in events, events


def test_a_cedar_deny_refuses_again_at_run_time(cedar_root: tuple[Stack, Path]) -> None:
    stack, _ = cedar_root
    into = {"step_id": "pick", "pointer": "/echo/word", "into": "/argv/-"}
    done = _approved(stack, _note("pick", "secret"), _echo("say", ["echo"], input_from=into))
    assert done["status"] == "failed" and done["error_code"] == "cedar_denied", done.get(
        "error_message"
    )
    assert "no-secret-words" in str(done.get("error_message")), done
    # the refusal at run time is a security episode of the run, at the step
    refusals = stack.sql(
        "SELECT step_id FROM episodes WHERE run_id = :r AND body_json LIKE :c"
        " AND body_json LIKE :v",
        r=done["run_id"],
        c="%refused: cedar_denied%",
        v='%"policy_violation"%',
    )
    assert refusals and {step for (step,) in refusals} == {"say"}, refusals
    # the same plan with a harmless word passes both gates (the step itself then runs
    # or is refused for want of a sandbox: never by Cedar)
    fine = _approved(stack, _note("pick", "hello"), _echo("say", ["echo"], input_from=into))
    assert fine["error_code"] != "cedar_denied", fine
    digests = stack.sql(
        "SELECT cedar_digest FROM runs WHERE run_id IN (:a, :b)", a=done["run_id"], b=fine["run_id"]
    )
    found = catalog.cedar_policy_set(PROFILE)
    assert found is not None and {d for (d,) in digests} == {found.digest}
    assert stack.run(str(done["run_id"]))["cedar_digest"] == found.digest  # in the run view


def test_a_replay_holds_a_run_to_the_policy_set_of_its_time(
    cedar_root: tuple[Stack, Path],
) -> None:
    stack, cedar_file = cedar_root
    done = _approved(stack, _note("n1", "one"), _note("n2", "two"))
    assert done["status"] == "succeeded", done
    run_id = str(done["run_id"])
    kept = stack.sql("SELECT kind, policy_id FROM policy_versions WHERE kind = 'cedar'")
    assert ("cedar", PROFILE) in kept

    cedar_file.write_text(EDITED)  # as after an edit and a restart
    catalog.reload()
    try:
        found = catalog.cedar_policy_set(PROFILE)
        assert found is not None and "no-notes" in found.model.text
        db = open_database(stack.database_url)
        try:
            same = replay_run(db, runtime().settings, run_id)
            today = replay_run(db, runtime().settings, run_id, "current")
        finally:
            db.dispose()
        assert same.match and same.rules == "recorded", same
        assert not today.match
        assert [d.kind for d in today.divergences] == ["policy_digest"], today
        assert "Cedar policy set" in today.divergences[0].message
    finally:
        cedar_file.write_text(POLICIES)
        catalog.reload()


def test_a_policy_naming_an_unknown_entity_is_refused_at_load(
    cedar_root: tuple[Stack, Path],
) -> None:
    _, cedar_file = cedar_root
    cedar_file.write_text(
        POLICIES + '@id("x") forbid (principal, action, resource == Gatehouse::Connector::"ftp");'
    )
    catalog.reload()
    try:
        with pytest.raises(RuntimeError) as caught:
            catalog.profile(PROFILE)
        message = str(caught.value)
        assert f"{PROFILE}.cedar" in message and 'Gatehouse::Connector::"ftp"' in message
        assert "cedar_policy_invalid" in message  # the code docs/policies.md names
        cedar_file.write_text(POLICIES.replace('Action::"restricted_shell"', 'Action::"ssh"'))
        catalog.reload()
        with pytest.raises(RuntimeError, match="unrecognized action"):
            catalog.list_cedar_policy_sets()
    finally:
        cedar_file.write_text(POLICIES)
        catalog.reload()
