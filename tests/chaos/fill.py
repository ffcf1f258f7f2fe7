"""What the full-disk scenarios share: runs in flight before a disk fills, and
submitting to a full database until enough submissions were refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.chaos.scenario import Scenario

__all__ = ["count_in_logs", "picked_up", "runs_in_flight", "space_waits", "submit_while_full"]


def picked_up(sc: Scenario, run_ids: list[str], timeout: float = 30) -> None:
    """Until every run has been picked up (none still queued)."""
    deadline = time.monotonic() + timeout
    while any(sc.status(r) == "queued" for r in run_ids):
        if time.monotonic() > deadline:
            raise TimeoutError("runs were not picked up")
        time.sleep(0.2)


def runs_in_flight(sc: Scenario, n: int) -> list[str]:
    """Submit ``n`` runs over every channel, approve each, and wait until a worker has
    picked every one up."""
    run_ids = [sc.submit(sc.plan(list(sc.channels))) for _ in range(n)]
    for run_id in run_ids:
        sc.decide(run_id)
    picked_up(sc, run_ids)
    return run_ids


def submit_while_full(sc: Scenario, refusals: int, tries: int = 60) -> dict[str, Any]:
    """Submit to a full database until ``refusals`` were refused. A database may still
    fit a few writes in space it already holds (SQLite's WAL pages, PostgreSQL's
    partly filled pages): a submission it accepts is a run like any other (booked,
    approved once space is back, and it must finish)."""
    refused: list[dict[str, Any]] = []
    accepted: list[str] = []
    for _ in range(tries):
        if len(refused) >= refusals:
            break
        planned = sc.plan(list(sc.channels))
        body = {"recipe": "echo", "objective": "full", "mode": "run-plan", "plan": planned.plan}
        r = sc.api.once("POST", "/intent", "submitter", body, {"Idempotency-Key": planned.tag})
        if r.status_code in (200, 202):
            run_id = str(r.json()["run_id"])
            sc.book.add(run_id, planned)
            accepted.append(run_id)
            continue
        error = r.json().get("error", {})
        refused.append(
            {
                "status": r.status_code,
                "code": error.get("code"),
                "retryable": error.get("retryable"),
                "retry_after": r.headers.get("Retry-After"),
            }
        )
    return {"refused": refused, "accepted": accepted}


def space_waits(logs: Path) -> int:
    """How often the workers (their logs in ``logs``) said a write waits for space."""
    return count_in_logs(logs, "the disk is full")


def count_in_logs(logs: Path, phrase: str) -> int:
    """How often ``phrase`` stands in the ``*.log`` files of ``logs``."""
    return sum(p.read_text(errors="replace").count(phrase) for p in logs.glob("*.log"))
