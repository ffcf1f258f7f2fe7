"""A record of an event is named by that event, never by content another event can
share. Two runs of one plan, two sign-ins of one person, one notification about two
runs: each writes the same content twice and each write stays a record of its own.

The reported defect: a run's automatic approval was keyed by the plan's digest
alone, so the second run of a plan met the first run's row, its workflow died and
the run stayed ``running`` for ever. Every table of Gatehouse's is named below:
either as a record of events (written twice here with the same content, for two
runs or two people, and both kept) or with the reason its key is not an event's.
A table added without a line here fails ``test_every_table_is_named``. Both databases.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from contracts import Decision, JsonObject, digest_of
from ledger import (
    Conn,
    Database,
    anchors,
    approvals,
    events,
    evidence,
    notifications,
    now_iso,
    oidc,
)
from policies.episodes import episode, security_episode
from tests.support.rows import new_run

RUNS = ("run_events_a", "run_events_b")
DIGEST = digest_of({"plan": "the same plan for both runs"})


def _decision(conn: Conn, run_id: str) -> None:
    approvals.insert_decision(
        conn, run_id=run_id, plan_digest=DIGEST, decision=Decision.APPROVED,
        decided_by="policy:auto-read-only", comment="every step is read-only",
    )  # fmt: skip


def _endorsement(conn: Conn, run_id: str) -> None:
    approvals.endorse(conn, run_id, DIGEST, "ann", comment="looks right")


def _delivery(conn: Conn, run_id: str) -> None:
    payload: JsonObject = {
        "delivery_id": notifications.delivery_id(run_id, 1, "run.waiting", "team"),
        "event": "run.waiting",
        "run_id": run_id,
    }
    notifications.add_delivery(
        conn, run_id=run_id, seq=1, event="run.waiting", sink_id="team", payload=payload
    )


def _episode(conn: Conn, run_id: str) -> None:
    evidence.put_episode(
        conn, run_id, None,
        episode(run_id=run_id, kind="summary", subject="run", episode_type="execution/run_summary",
                status="completed", summary="the same summary", executor_id="w1",
                recorded_at="2026-12-01T00:00:00Z", details={"steps": []}),
    )  # fmt: skip


def _security_event(conn: Conn, run_id: str) -> None:
    from contracts import ErrorCode

    evidence.put_episode(
        conn, run_id, None,
        security_episode(run_id=run_id, subject="workflow_lost:same", code=ErrorCode.WORKFLOW_LOST,
                         message="the same cause", executor_id="w1",
                         recorded_at="2026-12-01T00:00:00Z", details={}),
    )  # fmt: skip


def _checkpoint(conn: Conn, run_id: str) -> None:
    anchors.record_checkpoint(conn, run_id, "w1", None)


def _event(conn: Conn, run_id: str) -> None:
    events.emit(conn, run_id, "run.phase", {"status": "running", "phase": "compile"})


# table -> how one event is written for a run (each run gets the same content)
PER_RUN: dict[str, Callable[[Conn, str], None]] = {
    "plan_approvals": _decision,
    "plan_endorsements": _endorsement,
    "notification_deliveries": _delivery,
    "episodes": _episode,
    "chain_checkpoints": _checkpoint,
    "run_events": _event,
}

# tables whose rows name events other than a run's: written twice with the same content
OTHER_EVENTS = {"dashboard_sessions", "security_events"}

# every other table, and why its key is not an event's (or is one by other means)
NOT_EVENTS = {
    "intents": "a fresh int_<uuid> per submission; the Idempotency-Key maps repeats to one",
    "runs": "a fresh run id per run",
    "plan_cards": "one per run (the run id)",
    "calls": "op_key = sha256(run_id, step_id, attempt): one call of one run",
    "run_steps": "(run_id, step_id): one step of one run",
    "artifacts": "content-addressed on purpose: the same bytes are one artifact",
    "run_artifacts": "(run_id, step_id, name): one output of one step",
    "executors": "one row per worker",
    "leases": "one row per lease name",
    "run_cancels": "one per run: the first cancel wins",
    "plan_revisions": "(run_id, revision)",
    "opa_runs": "one per run",
    "run_messages": "(run_id, turn)",
    "policy_versions": "content-addressed on purpose: one row per policy text",
    "slack_requests": "the request's signature: a second arrival is a replay, refused",
    "oidc_logins": "the digest of a fresh random state per sign-in",
    "oidc_id_tokens": "the ID token's own id (or digest): a second exchange is refused",
    "plan_edits": "one per run an edit made (the new run's id)",
    "slack_messages": "(sink, channel, ts): Slack's own id of the message",
    "schema_migrations": "one per migration",
}


@pytest.mark.parametrize("table", sorted(PER_RUN))
def test_the_same_content_for_two_runs_is_two_records(db: Database, table: str) -> None:
    for run_id in RUNS:
        new_run(db, run_id)
    for run_id in RUNS:
        with db.engine.begin() as conn:
            PER_RUN[table](conn, run_id)
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT run_id, COUNT(*) FROM {table} GROUP BY run_id"),
        ).all()
    counted = {str(r[0]): int(r[1]) for r in rows}
    assert all(counted.get(run_id, 0) >= 1 for run_id in RUNS), counted


def test_two_sign_ins_of_one_person_are_two_sessions(db: Database) -> None:
    session = oidc.Session(identity="ann", roles=["approver"])
    with db.engine.begin() as conn:
        for token in ("first-cookie", "second-cookie"):
            oidc.start_session(conn, token, session, issuer="https://idp", hours=1)
    with db.engine.connect() as conn:
        assert oidc.find_session(conn, "first-cookie") == session
        assert oidc.find_session(conn, "second-cookie") == session


def test_one_refusal_twice_is_kept_or_counted(db: Database) -> None:
    """A refused request outside a run: two of the same are two rows, or (within the
    window, by its fingerprint) one row counting two — never one lost."""
    with db.engine.begin() as conn:
        for n in (1, 2):
            evidence.put_security_event(
                conn, episode_id=f"ep_refusal_{n}", run_id=None, error_code="unauthorized",
                category="auth", severity="medium", body={"same": "content"},
                recorded_at=now_iso(), fingerprint="same", open_since="2000-01-01T00:00:00Z",
            )  # fmt: skip
    with db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT SUM(repeat_count) FROM security_events")).all()
    assert rows[0][0] == 2


def test_every_table_is_named(db: Database) -> None:
    named = set(PER_RUN) | OTHER_EVENTS | set(NOT_EVENTS)
    found = set(sa.inspect(db.engine).get_table_names())
    dbos = {t for t in found if t.startswith(("workflow_", "operation_", "dbos_"))}
    dbos |= {"notifications", "event_dispatch_kv", "streams", "application_versions"}
    assert found - dbos - named == set(), "name the new table in test_event_ids.py"
