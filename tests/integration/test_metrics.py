"""``GET /metrics``: Prometheus text that parses, read from the database, moving as runs go."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from contracts import INTENT_QUEUE
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.stack import Stack

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(stack: Stack) -> Samples:
    r = stack.client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def _value(
    m: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_move_as_a_run_proceeds(stack: Stack) -> None:
    before = _scrape(stack)
    plan = noop_plan(2)
    r = stack.submit({"recipe": "echo", "objective": "metrics", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    waiting = _scrape(stack)
    assert _value(waiting, "gatehouse_runs_created_total") == (
        _value(before, "gatehouse_runs_created_total") + 1
    )
    assert _value(waiting, "gatehouse_runs", status="waiting_approval", phase="approval") >= 1
    digest = digest_of_plan(plan)
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert ok.status_code == 200, ok.text
    stack.wait(run_id, {"succeeded"})
    after = _scrape(stack)
    assert _value(after, "gatehouse_ledger_calls_total", kind="tool") == (
        _value(before, "gatehouse_ledger_calls_total", kind="tool") + 2
    )
    done = {"kind": "tool", "status": "completed"}
    assert _value(after, "gatehouse_ledger_calls_by_status", **done) == (
        _value(before, "gatehouse_ledger_calls_by_status", **done) + 2
    )
    assert _value(after, "gatehouse_ledger_call_seconds_total", kind="tool") >= _value(
        before, "gatehouse_ledger_call_seconds_total", kind="tool"
    )
    noop = {"driver_kind": "noop", "status": "succeeded"}
    assert _value(after, "gatehouse_steps_total", **noop) == (
        _value(before, "gatehouse_steps_total", **noop) + 2
    )
    approved = {"decision": "approved"}
    assert _value(after, "gatehouse_approval_decisions_total", **approved) == (
        _value(before, "gatehouse_approval_decisions_total", **approved) + 1
    )
    assert _value(after, "gatehouse_approval_wait_seconds_total", **approved) > _value(
        before, "gatehouse_approval_wait_seconds_total", **approved
    )
    ages = [v for (n, _), v in after.items() if n == "gatehouse_worker_heartbeat_age_seconds"]
    assert ages and all(0 <= age < 60 for age in ages)


def test_refused_requests_count_and_metrics_need_an_operator(stack: Stack) -> None:
    before = _scrape(stack)
    r = stack.client.get("/metrics", headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401
    r = stack.client.get("/metrics", headers=stack.auth("ann"))  # an approver only
    assert r.status_code == 403
    after = _scrape(stack)
    refused = sum(v for (n, _), v in after.items() if n == "gatehouse_security_events_total")
    assert (
        refused
        == sum(v for (n, _), v in before.items() if n == "gatehouse_security_events_total") + 2
    )


def test_the_queue_depth_has_a_sample_when_the_queue_is_empty(stack: Stack) -> None:
    stack.settle()  # nothing left queued
    scraped = _scrape(stack)
    key = ("gatehouse_queue_depth", (("queue", INTENT_QUEUE),))
    assert key in scraped, sorted(n for n, _ in scraped if "queue" in n)
    assert scraped[key] == 0
