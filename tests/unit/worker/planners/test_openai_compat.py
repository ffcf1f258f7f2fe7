"""The OpenAI-compatible planner against a scripted model over a real socket.

Why: the planner is the one place model output enters Gatehouse, so its wire
contract (headers, deterministic body, schema-constrained answers) and its
failure translation (everything becomes PLANNER_FAILED) are pinned here.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from contracts import (
    Connector,
    Destination,
    ErrorCode,
    GatehouseError,
    JsonObject,
    Limits,
    Recipe,
    ToolPool,
    canonical_json,
)
from contracts._schemas import render_schema, validate_instance
from contracts.tool_pool import CommandRule
from tests.support.scripted_model import ScriptedModel, Turn
from worker.planners import (
    ANSWER_RULE,
    ModelSettings,
    PlannerInput,
    plan_with_model,
    request_body,
)
from worker.planners import _chat as chat

pytestmark = pytest.mark.timeout(30)

PLAN: JsonObject = {
    "schema_id": "env.mova_agent_plan_v1",
    "objective": "Fetch the status page and note it",
    "steps": [
        {
            "step_id": "fetch",
            "verb": "fetch",
            "connector_id": "status-http",
            "driver_kind": "http",
            "input": {"url": "http://127.0.0.1:9/status"},
        },
        {
            "step_id": "note",
            "verb": "note",
            "connector_id": "notes",
            "driver_kind": "noop",
            "input_from": {"step_id": "fetch", "pointer": "/body"},
        },
    ],
}


def _pool() -> ToolPool:
    limits = Limits(timeout_s=5, max_output_bytes=65536)
    return ToolPool(
        tool_pool_id="test-pool",
        version="1",
        description="Connectors for planner tests",
        connectors=[
            Connector(
                connector_id="status-http",
                driver_kind="http",
                description="Read the local status page",
                limits=limits,
                destinations=[
                    Destination(scheme="http", host="127.0.0.1", ports=[9], allow_private=True)
                ],
            ),
            Connector(
                connector_id="shell",
                driver_kind="restricted_shell",
                description="List files",
                limits=limits,
                commands=[CommandRule(name="ls", path="/bin/ls", allowed_flags=["-l"])],
            ),
            Connector(connector_id="notes", driver_kind="noop", description="Write a note"),
        ],
    )


def _input(**overrides: object) -> PlannerInput:
    values: dict[str, object] = {
        "objective": "Fetch the status page and note it",
        "parameters": {"zeta": 1, "alpha": ["b", "a"], "name": "café"},
        "recipe": Recipe(
            recipe_id="status-check",
            title="Status check",
            planner="model",
            model_prompt="Check the service status using the tool pool.",
        ),
        "tool_pool": _pool(),
        "instruction": "You are a planner. Propose steps; never run them.",
    }
    values.update(overrides)
    return PlannerInput(**values)  # type: ignore[arg-type]


def _settings(
    base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0
) -> ModelSettings:
    return ModelSettings(
        base_url=base_url, model="scripted-1", api_key=api_key, timeout_s=timeout_s
    )


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- success ------------------------------------------------------------------


def test_returns_the_plan_the_model_proposed() -> None:
    with ScriptedModel([{"content": PLAN}]) as model:
        plan = plan_with_model(_settings(model.base_url), _input(), "key-1")
    assert plan == PLAN
    # The scripted plan is a real plan: the caller's validation would accept it.
    validate_instance("env.mova_agent_plan_v1", plan, ErrorCode.PLAN_INVALID)
    assert len(model.requests) == 1
    assert model.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    "wrapped",
    [
        "```json\n{plan}\n```",
        "```\n{plan}\n```",
        "  \n```JSON\r\n{plan}\r\n```\n\n",
    ],
)
def test_fenced_content_is_unwrapped(wrapped: str) -> None:
    content = wrapped.replace("{plan}", json.dumps(PLAN, indent=2))
    with ScriptedModel([{"content": content}]) as model:
        plan = plan_with_model(_settings(model.base_url), _input(), "key-1")
    assert plan == PLAN


def test_sends_idempotency_key_and_bearer_token() -> None:
    with ScriptedModel([{"content": PLAN}]) as model:
        plan_with_model(_settings(model.base_url, api_key="sk-test"), _input(), "run-1:plan:0")
    headers = model.requests[0].headers
    assert headers["idempotency-key"] == "run-1:plan:0"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"


def test_no_authorization_header_without_an_api_key() -> None:
    with ScriptedModel([{"content": PLAN}]) as model:
        plan_with_model(_settings(model.base_url + "/"), _input(), "key-1")
    assert model.requests[0].path == "/v1/chat/completions"  # trailing slash tolerated
    assert "authorization" not in model.requests[0].headers


def test_request_constrains_the_answer_to_the_plan_schema() -> None:
    settings = _settings("http://127.0.0.1:1/v1")
    with ScriptedModel([{"content": PLAN}]) as model:
        plan_with_model(_settings(model.base_url), _input(), "key-1")
    sent = model.requests[0].body
    assert isinstance(sent, dict)
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "mova_agent_plan_v1",
            "strict": True,
            "schema": render_schema("env.mova_agent_plan_v1"),
        },
    }
    assert sent["model"] == "scripted-1"
    assert sent["temperature"] == 0
    assert sent["stream"] is False
    # What went over the wire is byte-for-byte the canonical spelling (the ledgered one).
    expected = request_body(settings, _input())
    assert model.requests[0].raw_body == canonical_json(expected).encode("utf-8")


def test_messages_describe_the_pool_and_the_task() -> None:
    body = request_body(_settings("http://127.0.0.1:1/v1"), _input())
    messages = body["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages if isinstance(m, dict)] == ["system", "user"]
    system, user = (m["content"] for m in messages if isinstance(m, dict))
    assert isinstance(system, str)
    assert isinstance(user, str)
    assert system.startswith("You are a planner. Propose steps; never run them.")
    assert system.endswith(ANSWER_RULE)
    for needle in ("status-http", "restricted_shell", '"host":"127.0.0.1"', '"name":"ls"', "notes"):
        assert needle in system
    assert "Check the service status using the tool pool." in user
    assert "Objective: Fetch the status page and note it" in user
    assert canonical_json({"zeta": 1, "alpha": ["b", "a"], "name": "café"}) in user


def test_recipe_without_prompt_sends_objective_and_parameters_only() -> None:
    recipe = Recipe(recipe_id="bare", title="Bare", planner="model")
    body = request_body(_settings("http://127.0.0.1:1/v1"), _input(recipe=recipe))
    messages = body["messages"]
    assert isinstance(messages, list)
    user = messages[1]
    assert isinstance(user, dict)
    assert user["content"] == (
        'Objective: Fetch the status page and note it\n\nParameters (JSON): {"alpha":["b","a"],'
        '"name":"café","zeta":1}'
    )


def test_request_body_is_deterministic() -> None:
    settings = _settings("http://127.0.0.1:1/v1")
    first = request_body(settings, _input())
    # Same values, built independently and with the parameters in another key order.
    second = request_body(
        _settings("http://127.0.0.1:1/v1"),
        _input(parameters={"name": "café", "alpha": ["b", "a"], "zeta": 1}),
    )
    assert first == second
    assert canonical_json(first) == canonical_json(second)
    assert json.dumps(first) == json.dumps(second)  # even the non-canonical spelling
    # A different input changes the body (the check above can fail).
    other = request_body(settings, _input(objective="Something else"))
    assert canonical_json(other) != canonical_json(first)


# -- failures -----------------------------------------------------------------


def _planner_failure(settings: ModelSettings, key: str = "key-1") -> GatehouseError:
    with pytest.raises(GatehouseError) as caught:
        plan_with_model(settings, _input(), key)
    assert caught.value.code is ErrorCode.PLANNER_FAILED
    return caught.value


def test_http_500_is_planner_failed_with_status_and_excerpt() -> None:
    body = "upstream exploded " + "x" * 2000
    with ScriptedModel([{"status": 500, "body": body}]) as model:
        error = _planner_failure(_settings(model.base_url))
    assert error.details["status"] == 500
    excerpt = error.details["body_excerpt"]
    assert isinstance(excerpt, str)
    assert excerpt.startswith("upstream exploded")
    assert len(excerpt) == 500
    assert error.to_json()["retryable"] is True


def test_error_status_fails_even_with_a_plan_in_the_body() -> None:
    """A non-2xx answer is a failure whatever its body says."""
    completion = {"choices": [{"index": 0, "message": {"content": json.dumps(PLAN)}}]}
    with ScriptedModel([{"status": 503, "body": json.dumps(completion)}]) as model:
        error = _planner_failure(_settings(model.base_url))
    assert error.details["status"] == 503
    assert "503" in error.message


def test_redirect_is_not_followed() -> None:
    turns: list[Turn] = [
        {"status": 307, "body": "", "headers": {"Location": "/v1/chat/completions"}},
        {"content": PLAN},
    ]
    with ScriptedModel(turns) as model:
        error = _planner_failure(_settings(model.base_url))
    assert error.details["status"] == 307
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "content",
    [
        "Sure! Here is your plan: step one, fetch the page.",
        "```json\n{not json}\n```",
        '["a", "list", "is", "not", "a", "plan"]',
        '{"objective": NaN}',
        "   ",
    ],
)
def test_content_that_is_not_a_json_object_is_planner_failed(content: str) -> None:
    with ScriptedModel([{"content": content}]) as model:
        error = _planner_failure(_settings(model.base_url))
    assert error.details["status"] == 200


@pytest.mark.parametrize(
    "body",
    [
        "<html>gateway</html>",
        "{}",
        '{"choices": []}',
        '{"choices": [{"index": 0, "finish_reason": "stop"}]}',
        '{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "no"}}]}',
        "[1, 2]",
    ],
)
def test_malformed_completion_is_planner_failed(body: str) -> None:
    with ScriptedModel([{"status": 200, "body": body}]) as model:
        error = _planner_failure(_settings(model.base_url))
    assert error.details["status"] == 200
    assert error.details["body_excerpt"] == body


def test_oversized_response_is_planner_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat, "MAX_RESPONSE_BYTES", 4096)
    big = dict(PLAN, objective="x" * 8000)
    with ScriptedModel([{"content": big}]) as model:
        error = _planner_failure(_settings(model.base_url))
    assert "exceeds 4096 bytes" in error.message


def test_connection_refused_is_planner_failed() -> None:
    error = _planner_failure(_settings(f"http://127.0.0.1:{_closed_port()}/v1"))
    assert error.details["error"] == "ConnectError"
    assert isinstance(error.__cause__, httpx.ConnectError)


def test_timeout_is_planner_failed() -> None:
    with ScriptedModel([{"delay_s": 3.0, "content": PLAN}]) as model:
        started = time.monotonic()
        error = _planner_failure(_settings(model.base_url, timeout_s=0.5))
        elapsed = time.monotonic() - started
    assert elapsed < 2.5
    assert error.details["timeout_s"] == 0.5
    assert isinstance(error.__cause__, httpx.TimeoutException)


def test_script_turns_are_served_in_order_and_the_last_repeats() -> None:
    turns: list[Turn] = [{"status": 503, "body": "warming up"}, {"content": PLAN}]
    with ScriptedModel(turns) as model:
        settings = _settings(model.base_url)
        _planner_failure(settings, "k")
        assert plan_with_model(settings, _input(), "k") == PLAN
        assert plan_with_model(settings, _input(), "k") == PLAN
    assert len(model.requests) == 3
    assert {r.headers["idempotency-key"] for r in model.requests} == {"k"}


def test_scripted_model_streams_server_sent_events() -> None:
    """The planner never streams, but the fixture must speak the streaming shape too."""
    content = json.dumps(PLAN)
    with ScriptedModel([{"content": content}]) as model:
        response = httpx.post(
            f"{model.base_url}/chat/completions",
            json={"model": "m", "stream": True, "messages": []},
            trust_env=False,
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    lines = [line for line in response.text.split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    pieces = []
    for line in lines[:-1]:
        assert line.startswith("data: ")
        chunk = json.loads(line.removeprefix("data: "))
        assert chunk["object"] == "chat.completion.chunk"
        pieces.append(chunk["choices"][0]["delta"].get("content", ""))
    assert len(pieces) > 3
    assert "".join(pieces) == content
