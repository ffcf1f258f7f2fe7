"""The explain request: built from a run's evidence only, the same bytes every time.

Why: the request digest is what lets a second ask (and a replay) be served from
the ledger, so it must not move while the run does not; and the model must see
neither raw tool output nor an earlier report of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts import (
    CallView,
    EpisodeView,
    ErrorCode,
    GatehouseError,
    JsonObject,
    RunView,
    canonical_json,
    digest_of,
)
from worker.explain import (
    EXPLAIN_EPISODE_TYPE,
    EXPLAIN_INSTRUCTION,
    EXPLAIN_STEP_ID,
    OUTPUT_EXCERPT_CHARS,
    check_report,
    explain_prompt,
    explain_request_body,
    explain_seed,
    run_evidence,
)
from worker.planners import ModelSettings

RUN_ID = "run_" + "a" * 32
DIGEST = "b" * 64
SECRET = "TOOL-OUTPUT-TAIL-" + "z" * 40
LONG_OUTPUT = {"stdout": "x" * 5000 + SECRET}


def _run(**overrides: Any) -> RunView:
    plan = {
        "objective": "check stock",
        "steps": [
            {
                "step_id": "fetch",
                "verb": "fetch",
                "connector_id": "local-http",
                "driver_kind": "http",
                "title": "fetch the inventory",
                "input": {"url": "http://127.0.0.1:9/inventory.json"},
            },
            {
                "step_id": "count",
                "verb": "run",
                "connector_id": "workspace-shell",
                "driver_kind": "restricted_shell",
                "input": {"argv": ["wc", "-c", "inventory.json"]},
            },
        ],
    }
    body: dict[str, Any] = {
        "run_id": RUN_ID,
        "intent_id": "int_1",
        "recipe": "demo-inventory",
        "objective": "check stock",
        "mode": "full-cycle",
        "status": "failed",
        "phase": "done",
        "submitted_by": "alice",
        "policy_profile": "default",
        "tool_pool": "default",
        "plan_digest": DIGEST,
        "trace_digest": DIGEST,
        "random_seed": "seed-1",
        "error_code": "handler_failed",
        "error_message": "step count failed: " + "e" * 1000,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:05Z",
        "plan_card": {
            "plan": plan,
            "plan_digest": DIGEST,
            "status": "approved",
            "created_at": "2025-01-01T00:00:01Z",
        },
        "approvals": [
            {
                "plan_digest": DIGEST,
                "decision": "approved",
                "decided_by": "bob",
                "comment": "ok",
                "decided_at": "2025-01-01T00:00:02Z",
            }
        ],
        "steps": [
            {
                "step_id": "count",
                "position": 1,
                "driver_kind": "restricted_shell",
                "connector_id": "workspace-shell",
                "status": "failed",
                "op_key": "c" * 64,
                "output": LONG_OUTPUT,
                "error_code": "handler_failed",
                "error_message": "exit 1",
                "finished_at": "2025-01-01T00:00:04Z",
            },
            {
                "step_id": "fetch",
                "position": 0,
                "driver_kind": "http",
                "connector_id": "local-http",
                "status": "succeeded",
                "op_key": "d" * 64,
                "output": {"status": 200},
                "error_code": None,
                "error_message": None,
                "finished_at": "2025-01-01T00:00:03Z",
            },
        ],
        "links": {},
    }
    body.update(overrides)
    return RunView.model_validate(body)


def _call(step_id: str, status: str = "completed", **extra: Any) -> CallView:
    return CallView.model_validate(
        {
            "op_key": digest_of([step_id, status]),
            "run_id": RUN_ID,
            "step_id": step_id,
            "attempt": 1,
            "kind": "provider" if step_id.startswith("@") else "tool",
            "target": "recipe",
            "status": status,
            "request_digest": DIGEST,
            "response_digest": DIGEST,
            "error_code": None,
            "started_at": "2025-01-01T00:00:00Z",
            "finished_at": "2025-01-01T00:00:01Z",
            "duration_ms": 3,
            **extra,
        }
    )


def _episode(episode_type: str, step_id: str | None, summary: str) -> EpisodeView:
    return EpisodeView(
        episode_id="ep_" + digest_of([episode_type, summary])[:32],
        run_id=RUN_ID,
        step_id=step_id,
        episode_type=episode_type,
        result_status="completed",
        body={"result_summary": summary, "result_details": {"raw": SECRET}},
        recorded_at="2025-01-01T00:00:03Z",
    )


CALLS = [_call("@compile"), _call("fetch"), _call("count", "failed", error_code="handler_failed")]
EPISODES = [
    _episode("plan/agent_plan", None, "plan of 2 steps"),
    _episode("execution/step", "count", "count failed"),
]
EXPLAINED_CALL = _call(EXPLAIN_STEP_ID)
EXPLAINED_EPISODE = _episode(EXPLAIN_EPISODE_TYPE, EXPLAIN_STEP_ID, "an earlier report")


def _body(evidence: JsonObject) -> JsonObject:
    system, user = explain_prompt(RUN_ID, evidence)
    settings = ModelSettings(base_url="http://127.0.0.1:1/v1", model="scripted", api_key=None)
    return explain_request_body(settings, system, user, explain_seed("seed-1", RUN_ID))


def test_the_same_evidence_builds_the_same_bytes() -> None:
    first = canonical_json(_body(run_evidence(_run(), CALLS, EPISODES)))
    again = canonical_json(_body(run_evidence(_run(), list(CALLS), list(EPISODES))))
    assert first == again
    # another run state is another question
    other = canonical_json(_body(run_evidence(_run(status="succeeded"), CALLS, EPISODES)))
    assert other != first


def test_earlier_explains_are_not_evidence() -> None:
    """An explain leaves a ledger row and an episode; the next request must not change."""
    before = run_evidence(_run(), CALLS, EPISODES)
    after = run_evidence(_run(), [*CALLS, EXPLAINED_CALL], [*EPISODES, EXPLAINED_EPISODE])
    assert after == before
    assert EXPLAIN_STEP_ID not in canonical_json(after)
    assert "an earlier report" not in canonical_json(after)


def test_raw_outputs_stay_out() -> None:
    text = canonical_json(_body(run_evidence(_run(), CALLS, EPISODES)))
    assert SECRET not in text  # the tail of a long tool output, and episode details
    assert "x" * (OUTPUT_EXCERPT_CHARS + 1) not in text
    assert "e" * 400 not in text  # error messages are capped too
    evidence = run_evidence(_run(), CALLS, EPISODES)
    steps = evidence["steps"]
    assert isinstance(steps, list)
    assert [s["step_id"] for s in steps if isinstance(s, dict)] == ["fetch", "count"]
    count = steps[1]
    assert isinstance(count, dict)
    excerpt = count["output_excerpt"]
    assert isinstance(excerpt, str) and excerpt.startswith('{"stdout":"xxx')
    assert "more characters" in excerpt


def test_the_request_shape() -> None:
    body = _body(run_evidence(_run(), CALLS, EPISODES))
    assert body["temperature"] == 0 and body["stream"] is False
    assert body["seed"] == explain_seed("seed-1", RUN_ID)
    messages = body["messages"]
    assert isinstance(messages, list) and len(messages) == 2
    assert messages[0] == {"role": "system", "content": EXPLAIN_INSTRUCTION}
    fmt = body["response_format"]
    assert isinstance(fmt, dict) and fmt["type"] == "json_schema"
    assert explain_seed(None, RUN_ID) is None


REPORT: JsonObject = {
    "headline": "The count step failed",
    "summary": "The inventory was fetched; counting it failed with exit 1.",
    "steps": [{"step_id": "count", "note": "exit 1"}],
    "concerns": ["handler_failed on count"],
}


def test_a_valid_report_passes() -> None:
    evidence = run_evidence(_run(), CALLS, EPISODES)
    assert check_report(REPORT, evidence).headline == "The count step failed"


@pytest.mark.parametrize(
    "answer",
    [
        {**REPORT, "plan": {"steps": []}},  # an extra field: closed schema
        {k: v for k, v in REPORT.items() if k != "concerns"},  # a missing one
        {**REPORT, "headline": ""},
        {**REPORT, "steps": [{"step_id": "rm-rf", "note": "not a step of this plan"}]},
    ],
)
def test_an_invalid_report_is_explain_invalid(answer: JsonObject) -> None:
    evidence = run_evidence(_run(), CALLS, EPISODES)
    with pytest.raises(GatehouseError) as info:
        check_report(answer, evidence)
    assert info.value.code is ErrorCode.EXPLAIN_INVALID


# -- the transport: explain_with_model against the scripted model over a real socket --


def _model_settings(base_url: str) -> ModelSettings:
    return ModelSettings(base_url=base_url, model="scripted", api_key=None, timeout_s=5.0)


def test_explain_with_model_returns_the_answer_and_sends_the_key() -> None:
    from tests.support.scripted_model import ScriptedModel
    from worker.explain import explain_with_model

    body = _body(run_evidence(_run(), CALLS, EPISODES))
    with ScriptedModel([{"content": REPORT}]) as model:
        answer = explain_with_model(_model_settings(model.base_url), body, "key-1")
    assert answer == REPORT
    (sent,) = model.requests
    assert sent.headers["idempotency-key"] == "key-1"
    assert sent.body == body


@pytest.mark.parametrize(
    ("turn", "code"),
    [
        ({"status": 500, "body": "overloaded"}, ErrorCode.EXPLAIN_UNAVAILABLE),
        ({"content": "the run went fine"}, ErrorCode.EXPLAIN_INVALID),
        ({"content": ["a", "list"]}, ErrorCode.EXPLAIN_INVALID),
    ],
)
def test_explain_with_model_translates_failures(turn: dict[str, Any], code: ErrorCode) -> None:
    from tests.support.scripted_model import ScriptedModel
    from worker.explain import explain_with_model

    with ScriptedModel([turn]) as model, pytest.raises(GatehouseError) as info:
        explain_with_model(_model_settings(model.base_url), {"model": "scripted"}, "key-1")
    assert info.value.code is code
    assert "planner" not in info.value.message


def test_an_unreachable_model_is_explain_unavailable() -> None:
    import socket

    from worker.explain import explain_with_model

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(GatehouseError) as info:
        explain_with_model(_model_settings(f"http://127.0.0.1:{port}/v1"), {}, "key-1")
    assert info.value.code is ErrorCode.EXPLAIN_UNAVAILABLE


def test_the_cli_prints_the_report_readably() -> None:
    from contracts import ExplainView
    from shim.cli.client import explain_text

    view = ExplainView.model_validate(
        {
            "run_id": RUN_ID,
            "report": REPORT,
            "report_digest": digest_of(REPORT),
            "op_key": "c" * 64,
            "attempt": 2,
            "from_ledger": True,
            "request_digest": DIGEST,
            "evidence_digest": DIGEST,
            "model": "scripted",
        }
    )
    text = explain_text(view)
    assert text.splitlines()[0] == "The count step failed"
    assert "  count: exit 1" in text and "  - handler_failed on count" in text
    assert "served from the ledger" in text and "cccccccccccc" in text
    assert "{" not in text  # prose, not JSON (that is --json)
