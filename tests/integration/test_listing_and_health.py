"""Listing runs by who may see them, paging, readiness and the workers' heartbeats.

Runs on SQLite and PostgreSQL. The stack's worker runs in this process and
heartbeats like any other, so readiness is "ready" here; the shim-only case
(no worker at all: 503 with the reason) is in tests/e2e/test_cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.stack import Stack


def _echo(objective: str) -> dict[str, Any]:
    return {"recipe": "echo", "objective": objective, "parameters": {"n": 1}}


def _list(stack: Stack, who: str, **params: Any) -> dict[str, Any]:
    r = stack.client.get("/runs", params=params, headers=stack.auth(who))
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_submitters_list_their_own_runs_and_others_list_all(stack: Stack) -> None:
    sams = stack.client.post("/intent", json=_echo("sam's run"), headers=stack.auth("sam"))
    assert sams.status_code == 202, sams.text
    alices = stack.submit(_echo("alice's run")).json()["run_id"]
    sam_id = sams.json()["run_id"]

    mine = _list(stack, "sam", limit=200)["runs"]
    assert {r["submitted_by"] for r in mine} == {"sam"}
    assert sam_id in {r["run_id"] for r in mine} and alices not in {r["run_id"] for r in mine}
    row = next(r for r in mine if r["run_id"] == sam_id)
    assert row["objective"] == "sam's run" and row["recipe"] == "echo"
    assert "error_code" in row

    for who in ("olga", "ann"):  # operator, approver: every run
        every = {r["run_id"] for r in _list(stack, who, limit=200)["runs"]}
        assert {sam_id, alices} <= every, who


def test_pages_follow_the_cursor(stack: Stack) -> None:
    for i in range(3):
        assert stack.submit(_echo(f"page {i}")).status_code == 202
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = _list(stack, "olga", **params)
        assert len(page["runs"]) <= 2
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    everything = [r["run_id"] for r in _list(stack, "olga", limit=200)["runs"]]
    assert seen == everything and len(seen) >= 3 and len(set(seen)) == len(seen)


def test_a_bad_status_names_the_allowed_ones(stack: Stack) -> None:
    r = stack.client.get("/runs", params={"status": "bogus"})
    assert r.status_code == 422
    problem = r.json()["error"]["details"]["errors"][0]["problem"]
    assert "waiting_approval" in problem and "needs_operator" in problem


def test_ready_with_a_live_worker_and_the_workers_route(stack: Stack) -> None:
    r = stack.client.get("/readyz", headers={"Authorization": ""})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["status"] == "ready" and report["reasons"] == []
    assert report["checks"]["migrations"] == {"ok": True}
    assert report["checks"]["workers"]["live"] >= 1
    assert isinstance(report["queue"]["queued"], int)

    workers = stack.client.get("/workers", headers=stack.auth("olga")).json()
    me = next(w for w in workers["workers"] if w["executor_id"] == f"test-{stack.backend}")
    assert me["live"] is True and me["serves_queue"] is True
    assert 0 <= me["heartbeat_age_s"] <= workers["dead_after_s"]
    assert me["planners"][0] == "template"  # what it can plan with, as its heartbeat says
    assert "model" not in me["planners"]  # the test worker has no model configured
    assert stack.client.get("/workers", headers=stack.auth("sam")).status_code == 403

    # a worker that fell silent long ago is listed, not live
    stack.execute(
        "INSERT INTO executors (executor_id, app_version, hostname, pid, started_at,"
        " heartbeat_at) VALUES ('gone', :v, 'elsewhere', 1, :t, :t)",
        v=me["app_version"],
        t="2000-01-01T00:00:00.000Z",
    )
    gone = stack.client.get("/workers", headers=stack.auth("olga")).json()["workers"]
    assert next(w for w in gone if w["executor_id"] == "gone")["live"] is False


def test_the_open_routes_are_the_documented_ones(stack: Stack) -> None:
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text("utf-8")
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"):
        r = stack.client.get(path, headers={"Authorization": ""})
        assert r.status_code == 200, (path, r.text[:200])
        assert f"`{path}`" in api, f"docs/api.md does not say {path} is open"
    for path in ("/runs", "/workers", "/recipes"):
        r = stack.client.get(path, headers={"Authorization": ""})
        assert r.status_code == 401, path


def test_probes_take_cache_busting_parameters_and_other_routes_do_not(stack: Stack) -> None:
    """A load balancer's ``/healthz?_=1712`` is a probe like any other, not an
    ``invalid_request`` and a security event; a misspelt parameter elsewhere still is."""
    before = stack.sql("SELECT COUNT(*) FROM security_events")
    for path in ("/healthz", "/readyz"):
        r = stack.client.get(path, params={"_": "1712", "x": "1"}, headers={"Authorization": ""})
        assert r.status_code == 200, (path, r.text[:200])
    metrics = stack.client.get("/metrics", params={"name[]": "up"}, headers=stack.auth("olga"))
    assert metrics.status_code == 200, metrics.text[:200]
    assert stack.sql("SELECT COUNT(*) FROM security_events") == before
    misspelt = stack.client.get("/runs", params={"limt": "5"}, headers=stack.auth("olga"))
    assert misspelt.status_code == 422 and "limt" in misspelt.text
