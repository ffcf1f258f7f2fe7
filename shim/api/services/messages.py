"""Follow-up messages to an interactive OPA run (``POST /runs/{id}/messages``).

The shim records the message as the run's next turn (``run_messages``, under
the run's row lock, so turns are numbered in the order they were accepted and
a cancel or the run's end cannot slip between the check and the write), then
wakes the workflow. The worker plans, gates and waits for approval of each
turn like any plan; ``end`` closes the session and the run ends.
"""

from __future__ import annotations

from contracts import (
    APPROVAL_TOPIC,
    ErrorCode,
    GatehouseError,
    JsonObject,
    MessageAccepted,
    MessageRequest,
)
from ledger import evidence, messages, now_iso, opa_runs
from policies.episodes import episode
from shim.api.services.acting import acting_as, lock_own_run, run_links
from shim.api.services.cancel import refuse_if_cancelled
from shim.api.services.core import Service
from shim.tokens import Identity

__all__ = ["send_message"]


def _not_awaiting(run_id: str, why: str, details: JsonObject | None = None) -> GatehouseError:
    return GatehouseError(
        ErrorCode.RUN_NOT_AWAITING_INPUT, f"run {run_id!r} takes no message: {why}", details
    )


def send_message(
    service: Service, run_id: str, body: MessageRequest, who: Identity
) -> MessageAccepted:
    """Record ``body`` as the run's next turn (its submitter, or an operator)."""
    db, client = service.db, service.client
    body = acting_as(body, "sent_by", who)
    with db.engine.begin() as conn:
        run = lock_own_run(conn, run_id, who, "write to")
        locked = refuse_if_cancelled(conn, run_id)
        job = opa_runs.job(conn, run_id)
        if job is None or job.execution_mode != "interactive":
            raise _not_awaiting(run_id, "it is not an interactive OPA run")
        if run.status.terminal:
            raise _not_awaiting(run_id, f"it is {run.status.value}", {"status": run.status.value})
        previous = messages.last(conn, run_id)
        if previous is not None and previous.ends:
            raise _not_awaiting(run_id, f"its session was closed by {previous.sent_by}")
        message = messages.add(conn, run_id, body.text, body.end, who.name)
        what = "closed the session" if body.end else f"sent follow-up {message.turn}"
        evidence.put_episode(
            conn,
            run_id,
            None,
            episode(
                run_id=run_id,
                kind="message",
                subject=f"turn-{message.turn}",
                episode_type="execution/follow_up",
                status="completed",
                summary=f"{who.name} {what}",
                executor_id=who.name,
                recorded_at=now_iso(),
                details={"turn": message.turn, "end": body.end, "sent_by": who.name},
            ),
        )
        split = service.hand_off(conn, run_id, locked=locked)  # as locked: no park since
    if not split:  # a run from before the split waits in place: wake it
        client.send(
            run_id,
            {"message": message.turn},
            APPROVAL_TOPIC,
            idempotency_key=f"{run_id}:message:{message.turn}",
        )
    return MessageAccepted(
        run_id=run_id,
        turn=message.turn,
        end=message.ends,
        sent_by=message.sent_by,
        sent_at=message.sent_at,
        links=run_links(run_id),
    )
