"""What ``gatehouse approve`` and ``reject`` share: the decision on a run's plan.

The plan digest decided on is the plan card's unless ``--digest`` names one;
``--wait`` then follows the run past the decision.

A decision the shim already holds is not recorded again, and the command says
what is on record rather than ``recorded false``: the same decision on a run
still under way is a repeat and ends 0; on a run that has finished it is
refused, exit 1 (nothing the person asked for happened). The shim answers a
repeat with the first decider's name, and the CLI does not know whose token it
holds, so the line names who decided rather than guessing it was you.
"""

from __future__ import annotations

import argparse

from contracts import DecisionAccepted, RunView
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.follow import no_worker, waited
from shim.cli.options import api_options, connect, run_id_argument, wait_option
from shim.cli.output import answer, note

__all__ = ["decide", "decision_arguments"]


def decision_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    wait_option(p)
    run_id_argument(p)
    p.add_argument("--digest", help="the plan digest decided on (default: the plan card's)")
    p.add_argument("--comment", help="a note kept with the decision")


def decide(args: argparse.Namespace, *, approve: bool) -> Exit:
    with connect(args) as api:
        card = None if args.digest else api.run(args.run_id).plan_card
        digest = args.digest or (card.plan_digest if card else None)
        if not digest:
            raise UsageError("the run has no plan card yet; pass --digest")
        decided = api.decide(args.run_id, approve, digest, args.comment)
        quorum = decided.quorum
        if quorum is not None and quorum.missing:
            counted = "counted" if decided.recorded else "already counted (nothing new recorded)"
            note(f"{counted}: {len(quorum.approved_by)} of {quorum.needed} approvers; the plan"
                 f" waits for {quorum.missing} more before anything runs")  # fmt: skip
            answer(args, f"Decision on {args.run_id}", decided)
            return Exit.OK
        if not decided.recorded:
            note(_on_record(api.run(args.run_id), decided))  # refuses a run that finished
        absent = no_worker(*api.ready()) if approve else None
        if absent is not None:  # the decision stands; the run goes on when a worker starts
            note(f"warning: {absent}")
        if args.wait is not None:
            return waited(api, args, args.run_id, decided=True)
    answer(args, f"Decision on {args.run_id}", decided)
    return Exit.OK


def _on_record(view: RunView, decided: DecisionAccepted) -> str:
    """What the shim already held when a decision was not recorded again: the line to
    print for a run still under way, or the refusal for one that finished."""
    when = next(
        (
            f" at {a.decided_at}"
            for a in view.approvals
            if a.plan_digest == decided.plan_digest and a.decision is decided.decision
        ),
        "",
    )
    held = f"already {decided.decision.value} by {decided.decided_by}{when}"
    if view.status.terminal:
        raise FailedError(
            f"run {view.run_id} is {view.status.value}; it takes no decision (its plan was"
            f" {held}): nothing new recorded"
        )
    return f"{held}: nothing new recorded; the run is {view.status.value}"
