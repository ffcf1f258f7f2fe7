"""OpenTelemetry traces through DBOS: a span per run, a child span per step, with
Gatehouse's attributes, caught by an in-process exporter."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import require_backend
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import BACKENDS, Stack, running_stack

_exporter = InMemorySpanExporter()


def _install_provider() -> None:
    """One global tracer provider per process (OpenTelemetry allows no second)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)


@pytest.fixture(scope="module", params=BACKENDS)
def traced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    _install_provider()
    tmp = tmp_path_factory.mktemp(f"traces-{request.param}")
    with running_stack(request.param, tmp, worker_env={"GATEHOUSE_OTLP": "on"}) as stack:
        yield stack


def _attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def test_a_run_is_a_span_and_its_steps_are_its_children(traced: Stack) -> None:
    _exporter.clear()
    plan = noop_plan(2)
    r = traced.submit({"recipe": "echo", "objective": "traced", "mode": "run-plan", "plan": plan})
    run_id = r.json()["run_id"]
    traced.wait(run_id, {"waiting_approval"})
    ok = traced.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    assert ok.status_code == 200, ok.text
    traced.wait(run_id, {"succeeded"})
    traced.settle()
    # a run is split at its decision: a span per stretch, each naming the run. A stretch's
    # span ends as its workflow returns, a moment after the run's last status is written.
    deadline = time.monotonic() + 10
    while True:
        spans = _exporter.get_finished_spans()
        stretches = {
            str(_attrs(s).get("operationUUID")): s
            for s in spans
            if _attrs(s).get("operationType") == "workflow"
            and _attrs(s).get("gatehouse.run_id") == run_id
        }
        if set(stretches) == {run_id, f"{run_id}:1"} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert set(stretches) == {run_id, f"{run_id}:1"}, [s.name for s in spans]
    run = stretches[f"{run_id}:1"]  # the stretch after the approval runs the steps
    steps = [s for s in spans if _attrs(s).get("operationUUID") == f"{run_id}:1"]
    assert str(_attrs(run)["gatehouse.executor_id"]).startswith("test-")
    assert _attrs(run)["service.namespace"] == "gatehouse"  # the config file's attributes
    # a ledgered call is no DBOS step: its span is Gatehouse's, after the GenAI conventions
    assert not [s for s in steps if s.name == "gatehouse.tool_call"]
    calls = [
        s
        for s in spans
        if _attrs(s).get("gen_ai.operation.name") == "execute_tool"
        and _attrs(s).get("gatehouse.run_id") == run_id
    ]
    assert sorted(str(_attrs(s)["gatehouse.step_id"]) for s in calls) == ["s1", "s2"]
    for call in calls:
        a = _attrs(call)
        assert call.name == "execute_tool noop" and a["gen_ai.tool.name"] == "noop"
        assert a["gen_ai.tool.call.id"] == a["gatehouse.op_key"]
        assert a["gatehouse.kind"] == "tool" and a["gatehouse.attempt"] == 1
        assert len(str(a["gatehouse.op_key"])) == 64
        assert call.parent is not None and run.context is not None
        assert call.parent.span_id == run.context.span_id  # a child of the stretch's span
        assert call.context is not None and call.context.trace_id == run.context.trace_id
