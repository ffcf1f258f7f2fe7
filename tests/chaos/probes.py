"""Two short phases: every route with the database stopped, and 100 decisions at once.

* **route probe** — PostgreSQL stopped (``-m immediate``): every route that needs
  it answers 503 ``database_unavailable``, never 500; routes that do not need it
  still answer, and a refusal still stands.
* **approval storm** — 100 concurrent decisions on one waiting run, half approve
  (one approver), half reject (another): exactly one takes effect; repeats of it
  answer 200 ``recorded: false``, the other decision 409 ``already_decided``.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from contracts import STRETCH_WORKFLOW
from tests.chaos.client import say
from tests.chaos.crashpoints import wait_until
from tests.chaos.harness import DB_NAME
from tests.chaos.model import Channel

if TYPE_CHECKING:
    from tests.chaos.scenario import Scenario

__all__ = ["approval_storm", "probe_routes"]


def probe_routes(sc: Scenario) -> None:
    """Stop the database and call every route: those that need it must answer 503."""
    known = [e.run_id for e in sc.book.all()]
    run_id = known[0] if known else "run_" + "0" * 32
    key = "0" * 64
    planned = sc.plan([Channel.NOTE])
    intent = {"recipe": "echo", "objective": "probe", "mode": "run-plan", "plan": planned.plan}
    probes: list[tuple[str, str, str, Any, int]] = [
        ("GET", "/healthz", "operator", None, 503),
        ("GET", "/readyz", "operator", None, 503),
        ("GET", "/workers", "operator", None, 503),
        ("GET", "/runs", "operator", None, 503),
        ("GET", f"/runs/{run_id}", "operator", None, 503),
        ("GET", f"/runs/{run_id}/ledger", "operator", None, 503),
        ("GET", f"/runs/{run_id}/ledger/verify", "operator", None, 503),
        ("GET", f"/runs/{run_id}/episodes", "operator", None, 503),
        ("GET", f"/runs/{run_id}/artifacts", "operator", None, 503),
        ("GET", f"/artifacts/{key}", "operator", None, 503),
        ("GET", "/security-events", "operator", None, 503),
        ("POST", "/intent", "submitter", intent, 503),
        ("POST", f"/approve/{run_id}", "approver-a", {"plan_digest": key}, 503),
        ("POST", f"/reject/{run_id}", "approver-b", {"plan_digest": key}, 503),
        ("POST", f"/calls/{key}/resolve", "operator", {"outcome": "applied"}, 503),
        ("POST", f"/runs/{run_id}/replay", "operator", None, 503),
        ("POST", f"/runs/{run_id}/fork", "approver-a", {"from_step": 1}, 503),
        # no database needed: these still answer
        ("GET", "/recipes", "operator", None, 200),
        ("GET", "/policies", "operator", None, 200),
        # a refusal is recorded in the database; with it away the refusal still stands
        # (a submitter may list its own runs, not the workers)
        ("GET", "/workers", "submitter", None, 403),
    ]
    say("route probe: PostgreSQL stopped (immediate); calling every route")
    started = time.monotonic()
    sc.stack.pg.stop("immediate")
    try:
        for method, path, who, body, want in probes:
            r = sc.api.once(method, path, who, body)
            label = f"{method} {path.replace(run_id, '{run_id}').replace(key, '{key}')}"
            if want != 503:
                label += f" (as {who})"
            sc.probe[label] = r.status_code
            if r.status_code != want:
                sc.figures.fail(f"probe {label}: {r.status_code}, expected {want}: {r.text[:200]}")
        bad = sc.api.with_token("GET", "/runs", "nope")
        sc.probe["GET /runs (bad token)"] = bad.status_code
        if bad.status_code != 401:
            sc.figures.fail(f"probe bad token: {bad.status_code}: {bad.text[:200]}")
    finally:
        sc.stack.pg.start()
        sc.faults.down_s_total += time.monotonic() - started
        sc.figures.add("db_restarts")
    say(f"route probe: {sum(1 for c in sc.probe.values() if c == 503)} route(s) answered 503")


def approval_storm(sc: Scenario, n: int = 100) -> None:
    """``n`` concurrent decisions (half approve, half reject) on one waiting run."""
    planned = sc.plan([Channel.KEYED, Channel.NOTE])
    run_id = sc.submit(planned)
    wait_until(lambda: sc.status(run_id) == "waiting_approval", 60, "the plan card")
    barrier = threading.Barrier(n)

    def one(i: int) -> tuple[int, dict[str, Any]]:
        approve = i % 2 == 0
        who = "approver-a" if approve else "approver-b"
        barrier.wait()
        r = sc.api.call(
            "POST",
            f"/{'approve' if approve else 'reject'}/{run_id}",
            who,
            {"plan_digest": planned.digest},
        )
        body: dict[str, Any] = (
            r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        )
        body["_approve"] = approve
        return r.status_code, body

    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(one, range(n)))
    recorded = [b for code, b in answers if code == 200 and b.get("recorded") is True]
    repeats = [b for code, b in answers if code == 200 and b.get("recorded") is False]
    refused = [b for code, b in answers if code == 409]
    other = [(code, b) for code, b in answers if code not in (200, 409)]
    codes = {str(b.get("error", {}).get("code")) for b in refused}
    sc.storm = {
        "decisions": n,
        "took_effect": len(recorded),
        "same_decision_repeats_200": len(repeats),
        "refused_409": len(refused),
        "refusal_codes": sorted(codes),
        "other": len(other),
    }
    if len(recorded) != 1 or other or codes - {"already_decided"}:
        sc.figures.fail(f"approval storm: {sc.storm}; other answers {other[:3]}")
        return
    winner = "approved" if recorded[0]["_approve"] else "rejected"
    if any(b["_approve"] != recorded[0]["_approve"] for b in repeats) or any(
        b["_approve"] == recorded[0]["_approve"] for b in refused
    ):
        sc.figures.fail(f"approval storm: a decision against {winner} was accepted")
    entry = sc.book.get(run_id)
    assert entry is not None
    entry.decision = winner
    sc.storm["winner"] = winner
    say(f"approval storm: {n} decisions, one took effect ({winner}), {len(refused)} refused")


def decisions_before_pickup(sc: Scenario, n: int = 6) -> None:
    """Decisions that land between a run's park and its pick-up (issue 28): ``n``
    runs park at their plan cards; every worker is killed (kill -9); the decisions
    are made (approve two in three, reject the rest) while none runs, so each is a
    queued hand-off only; the database crash-restarts before any worker is back.
    Then the workers return: each run ends once, as decided (the final check
    counts every call)."""
    planned = [sc.plan([Channel.KEYED, Channel.NOTE]) for _ in range(n)]
    ids = [sc.submit(p) for p in planned]

    wait_until(
        lambda: all(sc.faults.parked(r) for r in ids), 90, "the runs to park at their plan cards"
    )
    workers = sc.stack.workers
    down = [s.executor_id for s in workers.live()]
    for executor_id in down:
        workers.slots[executor_id].hold = True
        workers.kill(executor_id, "random")
    for i, run_id in enumerate(ids):
        sc.decide(run_id, approve=i % 3 != 2)
    handed = sc.stack.pg.query(
        DB_NAME,
        "SELECT COUNT(*) FROM dbos.workflow_status WHERE status = 'ENQUEUED' AND name = :s",
        s=STRETCH_WORKFLOW,
    )
    sc.faults.restart_database(down_s=1.0)
    for executor_id in down:
        workers.slots[executor_id].hold = False  # the monitor starts each again
    left = sc.wait_terminal(ids, 120)
    sc.handoff = {
        "runs": n,
        "workers_killed": len(down),
        "handed_off_while_down": int(str(handed[0][0])),
        "not_ended": len(left),
    }
    if left or sc.handoff["handed_off_while_down"] < n:
        sc.figures.fail(f"decisions before pick-up: {sc.handoff}")
    say(f"decisions before pick-up: {sc.handoff}")
