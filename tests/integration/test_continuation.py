"""Issue 47: a parked run's continuation is data.

A run that parks at a decision writes where it goes on with the park
(``runs.continuation_json``, ``env.continuation_v1``); whoever decides hands it to
the next stretch in that stretch's job, and the stretch starts at the decision
instead of running the flow again from the start against the ledger. A decision
on the plan the run waits on is taken in the approval's own transaction, and the
stretch goes on from it at once (a plan changed behind Gatehouse's back is left to
the stretch, which refuses it: ``test_enforcement``). A run parked
without one (by gatehouse-6, or at another kind of wait) still goes on from its
ledger. Either way the run ends once and its replay, which runs the whole flow,
reaches the recorded trace digest. On both databases.
"""

from __future__ import annotations

import json
from typing import Any

from dbos import DBOS

from contracts import Continuation
from tests.integration.test_approval import decide, waiting_run
from tests.support.stack import Stack


def _continuation(stack: Stack, run_id: str) -> str | None:
    found = stack.sql("SELECT continuation_json FROM runs WHERE run_id = :r", r=run_id)
    return None if found[0][0] is None else str(found[0][0])


def _stretch_job(run_id: str, stretch: int) -> dict[str, Any]:
    """The job DBOS holds as the input of the run's stretch ``stretch``."""
    [found] = DBOS.list_workflows(workflow_ids=[f"{run_id}:{stretch}"], load_input=True)
    given = found.input
    assert given is not None
    job = given["args"][0]
    assert isinstance(job, dict), given
    return job


def _replays(stack: Stack, run_id: str) -> None:
    replayed = stack.client.post(f"/runs/{run_id}/replay", headers=stack.auth("alice"))
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["match"] is True, replayed.json()


def test_a_run_parked_at_its_decision_goes_on_from_the_continuation_its_park_wrote(
    stack: Stack,
) -> None:
    run_id, digest = waiting_run(stack)
    written = _continuation(stack, run_id)
    assert written is not None
    then = Continuation.model_validate_json(written)
    assert (then.at, then.plan_digest, then.position) == ("@approval", digest, 0)
    assert then.summary == [] and then.outputs == {}

    assert decide(stack, "approve", run_id, digest).status_code == 200
    # taken in the approval's own transaction: the card is approved once the answer is
    # back, whether or not a worker has reached the run yet (it may have finished it)
    [(status, card)] = stack.sql(
        "SELECT r.status, c.status FROM runs r JOIN plan_cards c ON c.run_id = r.run_id"
        " WHERE r.run_id = :r",
        r=run_id,
    )
    assert card == "approved" and status in {"running", "succeeded"}, (status, card)
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    # the hand-off gave the record and the decision to the stretch, which went on from them
    job = _stretch_job(run_id, 1)
    assert Continuation.model_validate(job["continuation"]) == then
    assert job["decided"] == {"plan_digest": digest, "decision": "approved", "decided_by": "bob"}
    assert _continuation(stack, run_id) is None  # answered: nothing left to go on from
    _replays(stack, run_id)


def test_a_rejection_taken_by_the_shim_ends_the_run_rejected(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)
    assert decide(stack, "reject", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"rejected", "failed"})["status"] == "rejected"
    assert _stretch_job(run_id, 1)["decided"]["decision"] == "rejected"
    calls = stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id)
    assert calls == [(0,)]
    _replays(stack, run_id)


def test_a_run_parked_without_a_continuation_goes_on_from_its_ledger(stack: Stack) -> None:
    """As a run gatehouse-6 parked: no record of where it goes on, so its next stretch
    runs the flow from the start, the ledger answering up to the decision."""
    run_id, digest = waiting_run(stack)
    assert _continuation(stack, run_id) is not None
    stack.execute("UPDATE runs SET continuation_json = NULL WHERE run_id = :r", r=run_id)

    assert decide(stack, "approve", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    job = _stretch_job(run_id, 1)
    assert job.get("continuation") is None, json.dumps(job)[:300]
    assert job.get("decided") is None  # without one the stretch takes the decision itself
    _replays(stack, run_id)


def test_a_continuation_changed_behind_gatehouse_s_back_is_dropped_for_the_ledger(
    stack: Stack,
) -> None:
    """A record this release cannot read (here: cut short) neither stops the decision
    nor runs from a guess: the stretch goes on from the ledger."""
    run_id, digest = waiting_run(stack)
    broken = '{"schema_id": "env.continuation_v1", "at": "@approval", "position": 7}'
    stack.execute("UPDATE runs SET continuation_json = :c WHERE run_id = :r", c=broken, r=run_id)

    assert decide(stack, "approve", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    job = _stretch_job(run_id, 1)
    assert job.get("continuation") is None and job.get("decided") is None, job
    calls = stack.sql("SELECT COUNT(*) FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id)
    assert calls[0][0] >= 1
    _replays(stack, run_id)
