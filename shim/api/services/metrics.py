"""Prometheus text for ``GET /metrics``: one snapshot of counts read from the database
(``ledger.metrics``) at each scrape, as metric families."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ledger import Database
from ledger.metrics import Snapshot, snapshot

__all__ = ["MEDIA_TYPE", "families", "scrape"]

MEDIA_TYPE = CONTENT_TYPE_LATEST


def families(s: Snapshot) -> Iterator[Metric]:
    runs = GaugeMetricFamily(
        "gatehouse_runs", "Runs now in each status and phase", labels=["status", "phase"]
    )
    for status, phase, n in s.runs:
        runs.add_metric([status, phase], n)
    yield runs
    yield CounterMetricFamily(
        "gatehouse_runs_created", "Runs ever accepted", value=sum(n for *_, n in s.runs)
    )
    calls = CounterMetricFamily(
        "gatehouse_ledger_calls", "Ledger entries ever (provider and tool calls)", labels=["kind"]
    )
    took = CounterMetricFamily(
        "gatehouse_ledger_call_seconds",
        "Seconds the callees took, as each call measured it (÷ calls: the mean)",
        labels=["kind"],
    )
    for kind, n, seconds in s.calls:
        calls.add_metric([kind], n)
        took.add_metric([kind], seconds)
    yield calls
    yield took
    by_status = GaugeMetricFamily(
        "gatehouse_ledger_calls_by_status",
        "Ledger entries in each status now (started and in_doubt are unfinished)",
        labels=["kind", "status"],
    )
    for kind, status, n in s.open_calls:
        by_status.add_metric([kind, status], n)
    yield by_status
    steps = CounterMetricFamily(
        "gatehouse_steps", "Plan steps executed or refused", labels=["driver_kind", "status"]
    )
    for driver, status, n in s.steps:
        steps.add_metric([driver, status], n)
    yield steps
    errors = CounterMetricFamily(
        "gatehouse_step_errors",
        "Steps ended by an error, by code (stalls: oc_stalled; timeouts: handler_timeout,"
        " oc_timeout)",
        labels=["error_code"],
    )
    for code, n in s.step_errors:
        errors.add_metric([code], n)
    yield errors
    decided = CounterMetricFamily(
        "gatehouse_approval_decisions", "Decisions on plan cards", labels=["decision"]
    )
    waited = CounterMetricFamily(
        "gatehouse_approval_wait_seconds",
        "Seconds from a plan card to its decision, summed (÷ decisions: the mean wait)",
        labels=["decision"],
    )
    for decision, n, seconds in s.approvals:
        decided.add_metric([decision], n)
        waited.add_metric([decision], seconds)
    yield decided
    yield waited
    security = CounterMetricFamily(
        "gatehouse_security_events", "Refused requests, by category", labels=["category"]
    )
    for category, n in s.security_events:
        security.add_metric([category], n)
    yield security
    queued = GaugeMetricFamily(
        "gatehouse_queue_depth", "Intents and jobs waiting for a worker", labels=["queue"]
    )
    for queue, n in s.queued:
        queued.add_metric([queue], n)
    yield queued
    age = GaugeMetricFamily(
        "gatehouse_worker_heartbeat_age_seconds",
        "Seconds since each worker's last heartbeat (reaped workers left out)",
        labels=["executor_id", "app_version"],
    )
    for executor_id, version, seconds in s.heartbeat_age_s:
        age.add_metric([executor_id, version], seconds)
    yield age


class _FromDatabase(Collector):
    def __init__(self, db: Database) -> None:
        self._db = db

    def collect(self) -> Iterator[Metric]:
        with self._db.engine.connect() as conn:
            found = snapshot(conn)
        yield from families(found)


def scrape(db: Database) -> bytes:
    """Every metric, read from the database now, as Prometheus text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FromDatabase(db))
    return generate_latest(registry)
