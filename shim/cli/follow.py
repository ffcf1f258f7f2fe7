"""``--wait``: follow a run until it is over or waits for a person, then print its card.

Progress (each status change, each finished step) goes to stderr as it
happens; the card (or its JSON) to stdout once the wait ends.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from contracts import JsonValue, RunStatus, RunView
from shim.cli.client import Client, dump
from shim.cli.errors import Exit, FailedError
from shim.cli.output import progress, show
from shim.cli.run_card import run_card

__all__ = ["FINISHED", "NEEDS_A_PERSON", "follow", "no_worker", "waited"]

# Where ``--wait`` stops following a run: it is over, or a person must act on it.
FINISHED = {"succeeded", "planned", "failed", "rejected", "cancelled"}
NEEDS_A_PERSON = {"waiting_approval", "needs_operator", "waiting_input"}


def no_worker(ready: bool, report: JsonValue) -> str | None:
    """GET /readyz's reason when no worker is live to take the run on, or None."""
    checks = report.get("checks") if isinstance(report, dict) else None
    workers = checks.get("workers") if isinstance(checks, dict) else None
    if not ready and isinstance(workers, dict) and workers.get("ok") is False:
        return str(workers.get("reason"))
    return None


def follow(
    api: Client,
    run_id: str,
    timeout_s: float,
    say: Callable[[str], None],
    decided: bool = False,
) -> RunView:
    """Follow a run until it is over or waits for a person, saying each status change
    and each finished step; raises TimeoutError after ``timeout_s``. ``decided``: a
    decision was just sent, so the wait for it that the run may still show is not
    where to stop."""
    deadline = time.monotonic() + timeout_s
    status, seen = "", set[str]()

    def tell(view: RunView) -> None:
        nonlocal status
        if view.status.value != status:
            status = view.status.value
            say(f"{run_id}: {status} ({view.phase})")
        for step in view.steps:
            if step.step_id not in seen:
                seen.add(step.step_id)
                code = f" {step.error_code}" if step.error_code else ""
                say(f"  step {step.step_id}: {step.status}{code}")

    if decided:  # first past the wait for the decision just sent
        others = {s.value for s in RunStatus} - {"waiting_approval"}
        api.wait(run_id, others, timeout_s, tell)
    return api.wait(run_id, FINISHED | NEEDS_A_PERSON, deadline - time.monotonic(), tell)


def waited(api: Client, args: argparse.Namespace, run_id: str, decided: bool = False) -> Exit:
    """Follow the run (progress on stderr), then print its card. OK when it succeeded,
    was planned or waits for a person (the card says what to do); FAILED when it
    failed, was rejected or cancelled; a wait that ran out (or a shim that stayed
    away past it: a restart it outlasts is waited out) is a FailedError."""
    try:
        view = follow(api, run_id, float(args.wait), progress, decided)
    except (TimeoutError, ConnectionError) as exc:
        raise FailedError(f"{exc}; it goes on: gatehouse show {run_id}") from exc
    show(args, dump(view), *run_card(view))
    return Exit.FAILED if view.status.value in ("failed", "rejected", "cancelled") else Exit.OK
