"""A Cedar policy that errs denies, through the real gate, on SQLite and PostgreSQL.

The policy set (strictly validated, loaded by the catalog) forbids shell steps with a
condition that overflows a Long as soon as the step has an argument. Cedar skips a
policy that errs; the gate must refuse instead, at submit (nothing stored) and right
before the step, when the argument arrives from an earlier step's output.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.extra_policies import extra_policies, write_profile
from tests.support.plans import digest_of_plan
from tests.support.stack import Stack, running_stack

PROFILE = "cedar-errs"
POLICIES = """
@id("permit-all") permit (principal, action, resource);

@id("overflows-on-any-argument")
forbid (principal, action == Gatehouse::Action::"restricted_shell", resource)
when { context has argc && context.argc * 4611686018427387904 * 2 > 0 };
"""


@pytest.fixture(scope="module")
def stack(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp(f"cedar-errs-{backend}")
    policies = root / "policies"
    tainted = {"noop": [""], "restricted_shell": ["/argv/1"]}
    write_profile(policies, PROFILE, cedar=PROFILE, tainted_data=tainted)
    (policies / "cedar").mkdir(parents=True)
    (policies / "cedar" / f"{PROFILE}.cedar").write_text(POLICIES)
    (root / "stack").mkdir()
    with extra_policies(policies), running_stack(backend, root / "stack") as running:
        yield running


def _echo(argv: list[str], **more: Any) -> dict[str, Any]:
    return {
        "step_id": "say",
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": argv},
        **more,
    }


def _body(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "recipe": "echo",
        "objective": "cedar errs",
        "mode": "run-plan",
        "plan": {"objective": "cedar errs", "steps": list(steps)},
        "policy_profile": PROFILE,
    }


def test_a_forbid_that_overflows_refuses_at_submit(stack: Stack) -> None:
    before = stack.sql("SELECT COUNT(*) FROM runs")[0][0]
    r = stack.submit(_body(_echo(["echo", "hello"])))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "cedar_denied"
    assert "overflows-on-any-argument" in error["message"]
    assert "overflow" in error["message"] and "errs denies" in error["message"]
    assert stack.sql("SELECT COUNT(*) FROM runs")[0][0] == before


def test_a_forbid_that_overflows_refuses_right_before_the_step(stack: Stack) -> None:
    note = {
        "step_id": "pick",
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"word": "hello"},
    }
    into = {"step_id": "pick", "pointer": "/echo/word", "into": "/argv/-"}
    body = _body(note, _echo(["echo"], input_from=into))
    r = stack.submit(body)  # no argument yet: nothing overflows at submit
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    stack.wait(run_id, {"waiting_approval"})
    digest = digest_of_plan(body["plan"])
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    done = stack.wait(run_id, {"succeeded", "failed"})
    assert done["status"] == "failed" and done["error_code"] == "cedar_denied", done
    assert "overflows-on-any-argument" in str(done.get("error_message")), done
