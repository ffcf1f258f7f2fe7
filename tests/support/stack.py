"""Test helpers: a fresh database per backend, and an in-process stack.

The stack is a worker (DBOS launched in this process, listening on the
queue) plus the shim's FastAPI app behind a TestClient. The shim reaches the
worker only through the database, exactly as in production.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from contracts import DriverKind, Role
from shim.api import create_app
from shim.settings import ShimSettings
from shim.tokens import add_token
from tests.support.plans import digest_of_plan, noop_plan

if TYPE_CHECKING:
    from worker.handlers import Handler

__all__ = [
    "BACKENDS",
    "GENEROUS_LIMITS",
    "Stack",
    "fresh_database_url",
    "pg_admin_url",
    "running_stack",
    "wait_for_status",
]

BACKENDS = ["sqlite", "postgres"]
# The suites send far more requests a second, from one address and mostly as one
# identity, than a person would: the door stays on with limits they never reach.
# A test of the limits themselves passes its own (shim_client's ``env``).
GENEROUS_LIMITS = {
    "GATEHOUSE_RATE_PER_IDENTITY": "10000:1000000",
    "GATEHOUSE_RATE_PER_ADDRESS": "10000:1000000",
}


def pg_admin_url() -> str:
    return os.environ.get("GATEHOUSE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def postgres_available() -> bool:
    url = pg_admin_url().replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def fresh_database_url(backend: str, tmp: Path) -> str:
    """A brand-new empty database of the given kind."""
    if backend == "sqlite":
        return f"sqlite:///{tmp / ('gh_' + uuid.uuid4().hex[:8] + '.sqlite')}"
    name = "gh_test_" + uuid.uuid4().hex[:10]
    admin = sa.create_engine(
        pg_admin_url().replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    base = pg_admin_url().rsplit("/", 1)[0]
    return f"{base}/{name}"


def drop_database(url: str) -> None:
    if url.startswith("sqlite"):
        return
    name = url.rsplit("/", 1)[1]
    admin = sa.create_engine(
        pg_admin_url().replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@dataclass
class Stack:
    backend: str
    database_url: str
    client: ActingClient
    workspace_root: Path
    # Set when a test writes behind Gatehouse's back: its runs are not replayed.
    tampered: bool = False
    # Where the worker appends each run's chain checkpoint (GATEHOUSE_ANCHOR_FILE)
    anchor_file: Path | None = None

    @property
    def workflow_table(self) -> str:
        """DBOS's workflow rows: beside ours on SQLite, in schema ``dbos`` on PostgreSQL."""
        return "workflow_status" if self.backend == "sqlite" else "dbos.workflow_status"

    def auth(self, name: str) -> dict[str, str]:
        """Headers that act as one of PEOPLE."""
        return self.client.people.auth(name)

    def submit(self, body: dict[str, Any], key: str | None = None) -> Any:
        headers = {"Idempotency-Key": key} if key else {}
        return self.client.post("/intent", json=body, headers=headers)

    def run(self, run_id: str) -> dict[str, Any]:
        r = self.client.get(f"/runs/{run_id}")
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    def wait(self, run_id: str, statuses: set[str], timeout: float = 60) -> dict[str, Any]:
        return wait_for_status(self.run, run_id, statuses, timeout)

    def finished_run(
        self, steps: int = 3, objective: str = "finished run", plan: dict[str, Any] | None = None
    ) -> str:
        """A run-plan run of ``steps`` noop steps (or of ``plan``), approved and
        succeeded; its id."""
        plan = plan if plan is not None else noop_plan(steps, objective=objective)
        body = {"recipe": "echo", "objective": objective, "mode": "run-plan", "plan": plan}
        r = self.submit(body)
        assert r.status_code == 202, r.text
        run_id = str(r.json()["run_id"])
        self.wait(run_id, {"waiting_approval"})
        ok = self.client.post(f"/approve/{run_id}", json={"plan_digest": digest_of_plan(plan)})
        assert ok.status_code == 200, ok.text
        assert self.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
        return run_id

    def settle(self, timeout: float = 60) -> None:
        """Wait until no run is queued or running, so row counts stand still."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = self.sql("SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')")
            if busy[0][0] == 0:
                return
            time.sleep(0.05)
        raise AssertionError("runs are still queued or running")

    def execute(self, statement: str, **params: Any) -> None:
        """Write to the database behind Gatehouse's back (tamper tests)."""
        from ledger import open_database

        self.tampered = True

        db = open_database(self.database_url)
        try:
            with db.engine.begin() as conn:
                conn.execute(sa.text(statement), params)
        finally:
            db.dispose()

    def sql(self, query: str, **params: Any) -> list[tuple[Any, ...]]:
        from ledger import open_database

        db = open_database(self.database_url)
        try:
            with db.engine.connect() as conn:
                return [tuple(r) for r in conn.execute(sa.text(query), params).all()]
        finally:
            db.dispose()


def replay_everything(stack: Stack) -> None:
    """Every finished run of the test replays from its ledger to its recorded
    trace digest, with no outbound connection (the network guard is on)."""
    from ledger import open_database
    from tests.support.guard import network_guard
    from worker.replay import replay_run
    from worker.runtime import runtime

    stack.settle()
    terminal = (
        "SELECT run_id FROM runs WHERE status IN ('succeeded', 'failed', 'rejected', 'planned',"
        " 'cancelled')"
    )
    # A run's status may read finished a moment before its workflow has written the
    # last of it (its trace digest): wait until no finished run's workflow is pending.
    table = stack.workflow_table
    # (a run is split at its decisions: its later stretches are RUN_ID:N)
    still = (
        f"{terminal} AND EXISTS (SELECT 1 FROM {table} w WHERE w.status = 'PENDING'"
        " AND (w.workflow_uuid = runs.run_id OR w.workflow_uuid LIKE runs.run_id || ':%'))"
    )
    deadline = time.monotonic() + 60
    while stack.sql(still) and time.monotonic() < deadline:
        time.sleep(0.1)
    finished = stack.sql(terminal)
    db = open_database(stack.database_url)
    try:
        with network_guard() as attempts:
            reports = [replay_run(db, runtime().settings, str(r[0])) for r in finished]
    finally:
        db.dispose()
    assert attempts == [], f"a replay tried to reach {attempts}"
    diverged = [r.model_dump(mode="json") for r in reports if not r.match]
    assert diverged == [], f"replays diverged: {diverged}"


def approve_fork(stack: Stack, fork_id: str, by: str = "ann") -> dict[str, Any]:
    """A fork waits on its own plan card for someone other than its requester and
    the parent's submitter (``by``, an approver); approve it, answer the run."""
    card = stack.wait(fork_id, {"waiting_approval", "failed"})
    assert card["status"] == "waiting_approval", card
    r = stack.client.post(
        f"/approve/{fork_id}", json={"plan_digest": card["plan_digest"]}, headers=stack.auth(by)
    )
    assert r.status_code == 200, r.text
    return card


def run_workflow_status(run_id: str) -> str | None:
    """DBOS's status of the run's latest workflow: a run is split at its decisions,
    and each stretch after the first is the workflow ``RUN_ID:N``."""
    from dbos import DBOS

    found = DBOS.list_workflows(
        workflow_id_prefix=run_id, sort_desc=True, limit=1, load_input=False, load_output=False
    )
    return found[0].status if found else None


def wait_workflow_status(run_id: str, want: str, timeout: float = 30) -> str | None:
    """Wait until the run's latest workflow has DBOS status ``want``; the status
    last seen. A parking stretch commits the park a moment before DBOS records
    its workflow's end, so a run seen waiting may still show PENDING briefly."""
    deadline = time.monotonic() + timeout
    seen = run_workflow_status(run_id)
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = run_workflow_status(run_id)
    return seen


def wait_for_status(read: Any, run_id: str, statuses: set[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = read(run_id)
        if last["status"] in statuses:
            return last
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} stayed {last.get('status')!r}; wanted {statuses}: {last}")


# The people tests act as. alice submits, bob approves (four-eyes holds), olga
# operates; sam and ann hold one role each, for the role tests.
PEOPLE: dict[str, list[Role]] = {
    "alice": [Role.SUBMITTER, Role.OPERATOR],
    "bob": [Role.APPROVER, Role.OPERATOR],
    "olga": [Role.OPERATOR],
    "sam": [Role.SUBMITTER],
    "ann": [Role.APPROVER],
    "max": [Role.SUBMITTER, Role.APPROVER],
}


class People:
    """Tokens for PEOPLE, written to a tokens file (digests only)."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / f"tokens-{uuid.uuid4().hex[:8]}.json"
        self.tokens = {name: add_token(self.file, name, roles) for name, roles in PEOPLE.items()}

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


class ActingClient(TestClient):
    """A TestClient that acts as two people, as a real deployment would have:
    decisions are sent as bob (approver), everything else as alice (submitter
    and operator). A request that sets its own Authorization header keeps it."""

    people: People

    def request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> Any:
        headers = dict(kwargs.pop("headers", None) or {})
        if not any(k.lower() == "authorization" for k in headers):
            decider = str(url).startswith(("/approve/", "/reject/"))
            headers.update(self.people.auth("bob" if decider else "alice"))
        return super().request(method, url, *args, headers=headers, **kwargs)


@contextmanager
def shim_client(
    database_url: str, people: People | None = None, env: Mapping[str, str] | None = None
) -> Iterator[ActingClient]:
    """The shim's app behind a TestClient; ``env``: more shim settings."""
    folder = Path(tempfile.mkdtemp(prefix="gh-tokens-"))
    who = people or People(folder)
    app = create_app(
        ShimSettings.from_env(
            {
                "GATEHOUSE_DATABASE_URL": database_url,
                "GATEHOUSE_TOKENS_FILE": str(who.file),
                **GENEROUS_LIMITS,
                **(env or {}),
            }
        )
    )
    with ActingClient(app) as client:
        client.people = who
        yield client


@contextmanager
def running_stack(
    backend: str,
    tmp: Path,
    worker_env: dict[str, str] | None = None,
    handlers: Mapping[DriverKind, Handler] | None = None,
    shim_env: Mapping[str, str] | None = None,
) -> Iterator[Stack]:
    """A worker in this process plus the shim behind a TestClient, on a fresh database.

    ``handlers`` replaces the static registry for this worker (test handlers);
    ``shim_env`` adds shim settings."""
    from dbos import DBOS

    from contracts import APPROVAL_TOPIC
    from worker.app import launch, shutdown
    from worker.runtime import WorkerSettings

    url = fresh_database_url(backend, tmp)
    workspace = tmp / "workspaces"
    # The run checkpoints' file, outside the database: the worker appends, the shim reads.
    anchors = {"GATEHOUSE_ANCHOR_FILE": str(tmp / f"anchors-{uuid.uuid4().hex[:8]}.jsonl")}
    settings = WorkerSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": url,
            "GATEHOUSE_EXECUTOR_ID": f"test-{backend}",
            "GATEHOUSE_WORKSPACE_ROOT": str(workspace),
            **anchors,
            **(worker_env or {}),
        }
    )
    launch(settings, handlers=handlers)
    try:
        with shim_client(url, env={**anchors, **(shim_env or {})}) as client:
            stack = Stack(
                backend=backend,
                database_url=url,
                client=client,
                workspace_root=workspace,
                anchor_file=settings.anchor_file,
            )
            yield stack
            if not stack.tampered:
                replay_everything(stack)
    finally:
        # A run left waiting for a decision holds a DBOS thread in recv (up to the
        # profile's recheck_s) and would poll a database about to be dropped:
        # cancel it and wake it, so its thread ends now.
        for wf in DBOS.list_workflows(status=["PENDING", "ENQUEUED"]):
            DBOS.cancel_workflow(wf.workflow_id)
            DBOS.send(wf.workflow_id, {"wake": True}, APPROVAL_TOPIC)
        shutdown()
        drop_database(url)
