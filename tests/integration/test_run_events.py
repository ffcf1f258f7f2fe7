"""``GET /runs/{id}/events``: a run's event stream, resumable, the same from any shim.

Streams are read from real shims (uvicorn on loopback): a client hangs up
mid-run, the shim it used is stopped, and a second shim serves the rest from
``Last-Event-ID`` with nothing missed or repeated."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from shim.cli import main
from tests.support.plans import digest_of_plan, noop_plan
from tests.support.served import ServedShim
from tests.support.stack import Stack


def read_events(
    url: str,
    run_id: str,
    headers: dict[str, str],
    stop_after: int | None = None,
    query: str = "",
) -> list[dict[str, Any]]:
    """The stream's events as dicts (id, event, data); ``stop_after``: hang up early."""
    got: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=url, timeout=60) as client,
        connect_sse(client, "GET", f"/runs/{run_id}/events{query}", headers=headers) as source,
    ):
        source.response.raise_for_status()
        for sse in source.iter_sse():
            got.append({"id": sse.id, "event": sse.event, "data": json.loads(sse.data)})
            if sse.event == "end" or (stop_after is not None and len(got) >= stop_after):
                break
    return got


def test_stream_resumes_across_shims_without_missing_or_repeating(stack: Stack) -> None:
    plan = noop_plan(3)
    r = stack.submit({"recipe": "echo", "objective": "events", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    auth = stack.auth("bob")
    tokens = stack.client.people.file
    with ServedShim(stack.database_url, tokens) as url:
        first = read_events(url, run_id, auth, stop_after=2)  # hang up mid-run
    assert [e["id"] for e in first] == ["1", "2"]
    assert first[0]["event"] == "run.accepted"
    ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
    assert ok.status_code == 200, ok.text
    with ServedShim(stack.database_url, tokens) as url:  # the first shim is gone
        rest = read_events(url, run_id, {**auth, "Last-Event-ID": first[-1]["id"]})
    assert rest[-1]["event"] == "end"
    assert rest[-1]["data"]["status"] == "succeeded"
    stream = first + rest[:-1]
    ids = [int(e["id"]) for e in stream]
    assert ids == list(range(1, len(ids) + 1)), ids
    kinds = [e["event"] for e in stream]
    assert kinds.count("step.started") == 3 and kinds.count("step.finished") == 3
    assert kinds.count("ledger.written") == 3 and kinds.count("approval") == 1
    phases = [e["data"]["body"]["status"] for e in stream if e["event"] == "run.phase"]
    assert phases[0] == "running" and "waiting_approval" in phases and phases[-1] == "succeeded"
    assert all(a != b for a, b in itertools.pairwise(phases))  # none twice in a row
    # the stream is the table, in order
    rows = stack.sql("SELECT seq, kind FROM run_events WHERE run_id = :r ORDER BY seq", r=run_id)
    assert [(int(s), str(k)) for s, k in rows] == list(zip(ids, kinds, strict=True))
    # a client that has everything gets only the end; ?after= works like the header
    with ServedShim(stack.database_url, tokens) as url:
        again = read_events(url, run_id, {**auth, "Last-Event-ID": str(ids[-1])})
        assert [e["event"] for e in again] == ["end"]
        tail = read_events(url, run_id, auth, query=f"?after={ids[-3]}")
    assert [int(e["id"]) for e in tail[:-1]] == ids[-2:]


def test_stream_refuses_bad_resume_points_and_strangers(stack: Stack) -> None:
    plan = noop_plan(1)
    r = stack.submit({"recipe": "echo", "objective": "events", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    bad = stack.client.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": "x1"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    negative = stack.client.get(f"/runs/{run_id}/events?after=-1")
    assert negative.status_code == 422
    stranger = stack.client.get(f"/runs/{run_id}/events", headers=stack.auth("sam"))
    assert stranger.status_code == 403
    missing = stack.client.get("/runs/run_" + "0" * 32 + "/events")
    assert missing.status_code == 404
    nobody = stack.client.get(f"/runs/{run_id}/events", headers={"Authorization": "Bearer nope"})
    assert nobody.status_code == 401


def test_runs_watch_follows_a_run_live_to_its_end(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = noop_plan(2)
    r = stack.submit({"recipe": "echo", "objective": "watch", "mode": "run-plan", "plan": plan})
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    token = stack.client.people.tokens["olga"]
    codes: list[int] = []
    with ServedShim(stack.database_url, stack.client.people.file) as url:
        argv = ["runs", "watch", run_id, "--url", url, "--token", token]
        watcher = threading.Thread(target=lambda: codes.append(cli(argv)))
        watcher.start()
        # The decision only once the watcher has said what it follows: a run that waits
        # for a person (a fixed pause lost that race on a slow machine).
        seen = ""
        deadline = time.monotonic() + 30
        while f"watching {run_id}" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
            seen += capsys.readouterr().out
        assert f"watching {run_id}: echo, waiting_approval" in seen, seen
        assert watcher.is_alive()
        ok = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
        assert ok.status_code == 200, ok.text
        watcher.join(60)
    assert codes == [0]
    out = seen + capsys.readouterr().out
    assert "plan approved by bob" in out
    for step in ("s1", "s2"):
        assert f"{step} (noop)" in out and f"ledger {step}: completed" in out
    assert "run succeeded (done)" in out or "run succeeded" in out
    assert out.rstrip().endswith(f"{run_id}: succeeded")


def test_runs_watch_of_an_unknown_run_says_so(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    token = stack.client.people.tokens["olga"]
    with ServedShim(stack.database_url, stack.client.people.file) as url:
        code = cli(["runs", "watch", "run_" + "0" * 32, "--url", url, "--token", token])
    assert code != 0
    assert "run_not_found" in capsys.readouterr().err


def cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0)
