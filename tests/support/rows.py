"""Rows and statements for the ledger's own integration tests (no worker, no shim)."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Connection

from contracts import IntentRequest
from ledger import Database, intents

__all__ = ["new_run", "statements_seen"]


def new_run(db: Database, run_id: str, objective: str = "rows") -> None:
    """A queued run of alice's with its intent and first event, as the intake writes it."""
    request = IntentRequest.model_validate(
        {"recipe": "echo", "objective": objective, "submitted_by": "alice"}
    )
    with db.engine.begin() as conn:
        intents.insert_intent_and_run(
            conn, intent_id=f"int_{run_id}", run_id=run_id, request=request, idempotency_key=None
        )


def statements_seen(db: Database, starting: str, containing: str = "") -> list[str]:
    """Every statement ``db``'s engine runs from now on that starts with ``starting``
    and holds ``containing``, as it is sent (the list grows as they run)."""
    seen: list[str] = []

    def before(_conn: Connection, _cursor: object, statement: str, *_: object) -> None:
        if statement.startswith(starting) and containing in statement:
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", before)
    return seen
