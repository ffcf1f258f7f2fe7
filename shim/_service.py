"""What the shim does, one method per route: validate, write, enqueue, read.

The shim never runs a workflow. It reaches workers only through the
database: intent and run rows plus the queue entry commit in one
transaction (``DBOSClient.enqueue_in_transaction``); a decision is a
``plan_approvals`` row, then a ``send`` that wakes the waiting workflow.
Intents (``shim._submit``), decisions (``shim._decide``), cancels
(``shim._cancel``) and what operators ask (``shim._operators``) have modules of
their own.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from dbos import DBOS, DBOSClient
from dbos._client import DEFAULT_CLIENT_POOL_SIZE
from dbos._serialization import DBOSPortableJSON
from sqlalchemy.engine import Connection

from contracts import (
    ApprovalRequest,
    CallResolution,
    CallResolved,
    CallView,
    CancelAccepted,
    CancelRequest,
    Decision,
    DecisionAccepted,
    EpisodeView,
    ErrorCode,
    ForkAccepted,
    ForkRequest,
    GatehouseError,
    IntentAccepted,
    IntentRequest,
    JsonObject,
    JsonValue,
    MessageAccepted,
    MessageRequest,
    ReplayReport,
    Role,
    RunList,
    RunStatus,
    RunView,
    digest_of,
)
from ledger import (
    Database,
    anchors,
    calls,
    chain,
    evidence,
    migrate,
    now_iso,
    opa_runs,
    open_database,
    runs,
    system_engine,
)
from policies.episodes import security_episode
from shim._acting import run_links
from shim._cancel import cancel_run
from shim._decide import decide
from shim._messages import send_message
from shim._operators import fork, replay, resolve
from shim._submit import submit
from shim._wait import RunWatch
from shim.settings import ShimSettings
from shim.tokens import Identity

__all__ = ["Service"]


# Answers that are not refusals of anything: nothing to record.
_NOT_REFUSALS = frozenset(
    {
        ErrorCode.NOT_FOUND,
        ErrorCode.RUN_NOT_FOUND,
        ErrorCode.ARTIFACT_NOT_FOUND,
        ErrorCode.CALL_NOT_FOUND,
        ErrorCode.OPA_OUTPUT_UNAVAILABLE,  # a run's output archive not there (yet): refused nothing
        ErrorCode.METHOD_NOT_ALLOWED,
        ErrorCode.DATABASE_UNAVAILABLE,
        ErrorCode.STORAGE_FULL,
        ErrorCode.INTERNAL_ERROR,
        # The model failed an explain: recorded in the ledger and as an episode, refused nothing.
        ErrorCode.EXPLAIN_UNAVAILABLE,
        ErrorCode.EXPLAIN_INVALID,
    }
)


class Service:
    def __init__(self, settings: ShimSettings) -> None:
        self.settings = settings
        self.db: Database = open_database(settings.database_url, timeouts=settings.pg_timeouts)
        # Either process may be first on a fresh database: the shim creates the
        # tables it writes and the DBOS system tables it enqueues into.
        migrate(self.db)
        DBOS.migrate(settings.database_url)
        # On PostgreSQL the client's engine carries the same connection bounds.
        self._client_engine = system_engine(
            settings.database_url, DEFAULT_CLIENT_POOL_SIZE, settings.pg_timeouts
        )
        self.client = DBOSClient(
            system_database_url=settings.database_url,
            system_database_engine=self._client_engine,
            serializer=DBOSPortableJSON,
        )
        self.watch = RunWatch(
            settings.database_url, postgres=not self.db.is_sqlite, timeouts=settings.pg_timeouts
        )
        self._refusals = threading.Lock()  # see record_refusal

    def close(self) -> None:
        self.watch.close()
        self.client.destroy()
        if self._client_engine is not None:
            self._client_engine.dispose()
        self.db.dispose()

    def status(self, run_id: str) -> RunStatus | None:
        """A run's status alone (one row); None when there is no such run."""
        with self.db.engine.connect() as conn:
            return runs.run_status(conn, run_id)

    def healthy(self) -> bool:
        with self.db.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True

    # ------------------------------------------------------------ intents
    def submit(
        self,
        request: IntentRequest,
        idempotency_key: str | None,
        who: Identity,
        opa: opa_runs.Intake | None = None,
    ) -> tuple[bool, IntentAccepted]:
        """Store and enqueue an intent; (created, answer); see ``shim._submit``."""
        return submit(
            self.db, self.client, self.settings, request, key=idempotency_key, who=who, opa=opa
        )

    # ------------------------------------------------------------ decisions
    def decide(
        self, run_id: str, body: ApprovalRequest, decision: Decision, who: Identity
    ) -> DecisionAccepted:
        """A decision on the run's current plan; see ``shim._decide``."""
        return decide(self.db, self.client, run_id, body=body, decision=decision, who=who)

    def message(self, run_id: str, body: MessageRequest, who: Identity) -> MessageAccepted:
        """The next turn of an interactive OPA run; see ``shim._messages``."""
        return send_message(self.db, self.client, run_id, body, who)

    def cancel(self, run_id: str, body: CancelRequest, who: Identity) -> CancelAccepted:
        """Cancel a run (its submitter or an operator); see ``shim._cancel``."""
        return cancel_run(self.db, self.client, run_id, body, who)

    # ------------------------------------------------------------ operators
    def resolve(self, op_key: str, body: CallResolution, who: Identity) -> CallResolved:
        """An operator's word on an in-doubt call; see ``shim._operators``."""
        return resolve(self.db, self.client, op_key, body, who)

    def replay(self, run_id: str, rules: str = "recorded") -> ReplayReport:
        """A worker replays a finished run from its ledger; see ``shim._operators``."""
        return replay(self.db, self.client, self.settings, run_id, rules)

    def fork(self, run_id: str, body: ForkRequest, who: Identity) -> ForkAccepted:
        """A new run from a finished one's plan step; see ``shim._operators``."""
        return fork(self.db, self.client, self.settings, run_id, body=body, who=who)

    # ------------------------------------------------------------ reads
    def run(self, run_id: str, who: Identity | None = None) -> RunView:
        """One run. A submitter sees only its own runs; approvers and operators see all."""
        with self.db.engine.connect() as conn:
            view = runs.get_run(conn, run_id, run_links(run_id))
        if view is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        privileged = who is None or who.has(Role.OPERATOR, Role.APPROVER)
        if not privileged and who is not None and view.submitted_by != who.name:
            raise GatehouseError(
                ErrorCode.FORBIDDEN, f"{who.name} may read only the runs it submitted"
            )
        return view

    def runs(
        self,
        status: RunStatus | None,
        limit: int,
        cursor: str | None,
        who: Identity | None = None,
        *,
        recipe: str | None = None,
    ) -> RunList:
        """A page of runs, newest first. A submitter lists only its own runs;
        approvers and operators list all (as they may read any)."""
        mine = None if who is None or who.has(Role.OPERATOR, Role.APPROVER) else who.name
        with self.db.engine.connect() as conn:
            found = runs.list_runs(
                conn, status, limit + 1, cursor, submitted_by=mine, recipe=recipe
            )
        more = len(found) > limit
        page = found[:limit]
        nxt = f"{page[-1].created_at}|{page[-1].run_id}" if more and page else None
        return RunList(runs=page, next_cursor=nxt)

    def _exists(self, conn: Connection, run_id: str) -> None:
        if runs.run_status(conn, run_id) is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")

    def ledger(self, run_id: str) -> list[CallView]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return calls.list_calls(conn, run_id)

    def verify_ledger(self, run_id: str) -> JsonObject:
        # The run's checkpoints, from the anchor file (outside the database: a rewrite
        # of the database cannot reach it) and from the database.
        filed = anchors.from_file(self.settings.anchor_file, run_id)
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return chain.verify(conn, run_id, anchors.of_run(conn, run_id) + filed).to_json()

    def episodes(self, run_id: str) -> list[EpisodeView]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return evidence.list_episodes(conn, run_id)

    def artifacts(self, run_id: str) -> list[dict[str, str | int]]:
        with self.db.engine.connect() as conn:
            self._exists(conn, run_id)
            return evidence.run_artifacts(conn, run_id)

    def security_events(self, limit: int) -> list[JsonObject]:
        with self.db.engine.connect() as conn:
            return evidence.list_security_events(conn, limit)

    def record_refusal(
        self,
        exc: GatehouseError,
        who: str | None,
        route: str,
        run_id: str | None,
        token_id: str | None = None,
        *,
        address: str = "-",
        template: str | None = None,
        repeats: int = 1,
    ) -> None:
        """Every refused request leaves a MOVA security episode (not found is no refusal).

        ``token_id`` names the caller's token when one matched, refused or not.
        Repeats of one refusal — its code, source ``address``, identity (or none) and
        ``template`` (method and route template; default ``route``) — within the window
        (``event_window_s`` from the first) are counted on the first one's row instead of
        adding rows: a flood leaves a bounded number of rows. ``repeats``: refusals this
        call stands for (the door counts rate-limited ones in memory and writes them
        together). One write at a time per shim process, so a burst of refusals holds one
        database connection, and two repeats never open two rows."""
        if exc.code in _NOT_REFUSALS:
            return
        now = now_iso()
        refused_token = exc.details.get("token_id")
        token_id = token_id or (refused_token if isinstance(refused_token, str) else None)
        tokens: dict[str, JsonValue] = {"token_id": token_id} if token_id else {}
        fingerprint = digest_of([exc.code.value, address, who or "", template or route])
        episode = security_episode(
            run_id=run_id,
            subject=f"request:{uuid.uuid4().hex}",
            code=exc.code,
            message=exc.message,
            executor_id="gatehouse-shim",
            recorded_at=now,
            details={
                "route": route,
                "identity": who,
                **tokens,
                "address": address,
                "refusal": exc.details,
            },
        )
        since = datetime.now(UTC) - timedelta(seconds=self.settings.event_window_s)
        with self._refusals, self.db.engine.begin() as conn:
            evidence.put_security_event(
                conn,
                episode_id=episode.episode_id,
                run_id=run_id,
                error_code=exc.code.value,
                category=episode.security_event_category,
                severity=episode.severity,
                body=episode.model_dump(mode="json"),
                recorded_at=now,
                fingerprint=fingerprint,
                open_since=since.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                repeats=repeats,
            )

    def artifact(self, digest: str) -> tuple[str, bytes]:
        with self.db.engine.connect() as conn:
            found = evidence.get_artifact(conn, digest)
        if found is None:
            raise GatehouseError(ErrorCode.ARTIFACT_NOT_FOUND, f"no artifact {digest}")
        return found
