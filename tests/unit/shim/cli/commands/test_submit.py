"""What ``gatehouse submit`` warns of after queueing a run, from GET /readyz."""

from __future__ import annotations

from contracts import JsonValue
from shim.cli.commands.submit import STALE_QUEUE_S, submit_warnings


def test_submit_warns_of_no_worker_and_of_a_full_one() -> None:
    no_worker: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": False, "reason": "no worker of version v"}},
        "queue": {"queued": 1, "oldest_queued_s": 0.1},
    }
    assert submit_warnings(False, no_worker) == ["no worker of version v"]
    live: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": True, "live": 1}},
        "queue": {"queued": 1},
    }
    assert submit_warnings(True, live) == []
    fresh: JsonValue = {**live, "queue": {"queued": 2, "oldest_queued_s": 1.5}}
    assert submit_warnings(True, fresh) == []
    stale: JsonValue = {**live, "queue": {"queued": 5, "oldest_queued_s": STALE_QUEUE_S + 1}}
    [warning] = submit_warnings(True, stale)
    assert warning.startswith("5 run(s) queued") and "GATEHOUSE_WORKER_CONCURRENCY" in warning
    assert submit_warnings(False, "not json") == []
