"""The executor boundary: envelopes in, results out, whatever the handler does.

The worker here delivers ``noop`` envelopes to a test handler that panics,
answers with garbage, or behaves, as the step's arguments ask. The
registry itself is untouched: ``running_stack`` passes the handlers in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from contracts import DriverKind, ErrorCode, Plan, digest_of, validate_instance
from contracts.execution import ExecutionEnvelope, ExecutionResult
from shim.local import InventoryService
from tests.conftest import require_backend
from tests.support.stack import BACKENDS, Stack, running_stack
from worker.handlers import HandlerContext, noop
from worker.handlers.registry import HANDLERS

SECRET = "do-not-leak-this-in-a-message"


def _unruly(envelope: ExecutionEnvelope, context: HandlerContext) -> ExecutionResult:
    """noop, unless the arguments ask it to panic or break the protocol."""
    behaviour = envelope.arguments.get("behave")
    if behaviour == "panic":
        raise RuntimeError(f"boom {SECRET}")
    if behaviour == "garbage":
        return {"status": "fine"}  # type: ignore[return-value]  # the point of the test
    if behaviour == "other-envelope":
        result = noop.run(envelope, context)
        return result.model_copy(update={"envelope_id": "env_" + "0" * 32})
    return noop.run(envelope, context)


@pytest.fixture(scope="module", params=BACKENDS)
def unruly(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    backend: str = request.param
    require_backend(backend)
    handlers = {**HANDLERS, DriverKind.NOOP: _unruly}
    with running_stack(
        backend, tmp_path_factory.mktemp(f"unruly-{backend}"), handlers=handlers
    ) as s:
        yield s


def _note(step_id: str, on_error: str = "fatal", **args: Any) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"text": step_id, **args},
        "on_error": on_error,
    }


def _run(stack: Stack, steps: list[dict[str, Any]]) -> dict[str, Any]:
    plan = {"objective": "coordinator", "steps": steps}
    r = stack.submit({"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    assert stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest}).status_code == 200
    return stack.wait(run_id, {"succeeded", "failed"})


def _ledger(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    """The run's tool calls as recorded: the envelope (request) and the response."""
    rows = stack.sql(
        "SELECT op_key, step_id, request_json, request_digest, response_json FROM calls"
        " WHERE run_id = :r AND kind = 'tool' ORDER BY started_at, step_id",
        r=run_id,
    )
    return [
        {
            "op_key": op_key,
            "step_id": step_id,
            "request": json.loads(request),
            "request_digest": request_digest,
            "response": json.loads(response),
        }
        for op_key, step_id, request, request_digest, response in rows
    ]


def test_every_call_records_its_envelope_and_result(unruly: Stack) -> None:
    done = _run(unruly, [_note("one"), _note("two")])
    assert done["status"] == "succeeded", done
    rows = _ledger(unruly, done["run_id"])
    assert [r["step_id"] for r in rows] == ["one", "two"]
    for row in rows:
        envelope = row["request"]
        validate_instance("env.execution_envelope_v1", envelope, ErrorCode.INVALID_REQUEST)
        assert row["request_digest"] == digest_of(envelope)
        assert envelope["task_id"] == row["step_id"]
        assert envelope["context"]["session_id"] == done["run_id"]
        assert envelope["extensions"]["gatehouse"]["op_key"] == row["op_key"]
        assert "connector:note" in envelope["context"]["permissions"]
        result = row["response"]["result"]
        assert result["envelope_id"] == envelope["id"]
        assert result["status"] == "success" and result["error"] is None


def test_a_panicking_handler_is_an_error_result_and_the_worker_goes_on(unruly: Stack) -> None:
    done = _run(unruly, [_note("first"), _note("boom", behave="panic"), _note("never")])
    assert done["status"] == "failed", done
    assert done["error_code"] == "executor_panic"
    assert SECRET not in str(done)  # the traceback is not in the run view
    [first, boom] = _ledger(unruly, done["run_id"])
    assert first["response"]["ok"] is True
    result = boom["response"]["result"]
    assert result["status"] == "error"
    assert result["error"]["code"] == "executor_panic"
    assert SECRET not in result["error"]["message"]
    [log] = [a for a in boom["response"]["artifacts"] if a["name"] == "panic.log"]
    r = unruly.client.get(f"/artifacts/{log['sha256']}")
    assert r.status_code == 200
    assert SECRET in r.text and "Traceback" in r.text  # system_log only
    # The worker is still serving.
    assert _run(unruly, [_note("after")])["status"] == "succeeded"


def test_a_soft_step_may_panic_and_the_run_goes_on(unruly: Stack) -> None:
    done = _run(unruly, [_note("boom", "continue", behave="panic"), _note("next")])
    assert done["status"] == "succeeded", done
    steps = {s["step_id"]: s for s in done["steps"]}
    assert steps["boom"]["error_code"] == "executor_panic"
    assert steps["next"]["status"] == "succeeded"


@pytest.mark.parametrize("behaviour", ["garbage", "other-envelope"])
def test_a_protocol_violation_ends_the_run_even_on_a_soft_step(
    unruly: Stack, behaviour: str
) -> None:
    done = _run(unruly, [_note("bad", "continue", behave=behaviour), _note("never")])
    assert done["status"] == "failed", done
    assert done["error_code"] == "protocol_violation"
    assert [s["step_id"] for s in done["steps"]] == ["bad"]
    events = unruly.client.get("/security-events", headers=unruly.auth("olga")).json()
    mine = [
        e["episode_type"]
        for e in events["security_events"]
        if e["result_details"].get("run_id") == done["run_id"]
    ]
    assert "security_event/protocol_violation" in mine, events


def test_runs_share_nothing(unruly: Stack) -> None:
    """Each run is its own session: its workspace holds only its own files, and a
    step cannot name another run's workspace."""
    with InventoryService() as inventory:
        saved = _run(
            unruly,
            [
                {
                    "step_id": "keep",
                    "verb": "fetch",
                    "connector_id": "local-http",
                    "driver_kind": "http",
                    "input": {
                        "url": f"{inventory.base_url}/inventory.json",
                        "save_as": "mine.json",
                    },
                }
            ],
        )
    assert saved["status"] == "succeeded", saved
    owner = saved["run_id"]
    assert (unruly.workspace_root / owner / "mine.json").is_file()

    listed = _run(unruly, [_shell("look", "ls", "-a")])
    assert listed["status"] == "succeeded", listed
    [look] = _ledger(unruly, listed["run_id"])
    assert "mine.json" not in look["response"]["output"]["stdout"]
    # the sandbox it ran in is in its evidence
    box = look["response"]["output"]["sandbox"]
    assert box["tool"] == "bubblewrap" and box["network"] is False
    assert box["limits"]["processes"] == 64 and "net" in box["namespaces"]

    # Naming another run's workspace is refused before anything is stored.
    plan = {"objective": "peek", "steps": [_shell("peek", "ls", f"../{owner}")]}
    r = unruly.submit({"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan})
    assert r.status_code == 422 and r.json()["error"]["code"] == "command_not_allowed", r.text


def _shell(step_id: str, *argv: str, on_error: str = "fatal") -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "run",
        "connector_id": "workspace-shell",
        "driver_kind": "restricted_shell",
        "input": {"argv": list(argv)},
        "on_error": on_error,
    }
