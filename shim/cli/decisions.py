"""What ``gatehouse approve`` and ``reject`` share: the decision on a run's plan.

The plan digest decided on is the plan card's unless ``--digest`` names one;
``--wait`` then follows the run past the decision.
"""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit, UsageError
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
            note(f"counted: {len(quorum.approved_by)} of {quorum.needed} approvers; the plan"
                 f" waits for {quorum.missing} more before anything runs")  # fmt: skip
            answer(args, f"Decision on {args.run_id}", decided)
            return Exit.OK
        absent = no_worker(*api.ready()) if approve else None
        if absent is not None:  # the decision stands; the run goes on when a worker starts
            note(f"warning: {absent}")
        if args.wait is not None:
            return waited(api, args, args.run_id, decided=True)
    answer(args, f"Decision on {args.run_id}", decided)
    return Exit.OK
