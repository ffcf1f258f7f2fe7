"""End to end: the real ``gatehouse`` command against a real ``gatehouse shim``.

One shim per database (SQLite and PostgreSQL), started as its own process with
no worker: readiness says so, ``submit`` warns, runs stay queued. The test that
starts a real worker has a shim of its own, and its run goes through its plan
card and approval from the command line. Each test reads only what it made, so
any order passes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts import Role
from shim.local import InventoryService, free_port, stop, wait_healthy
from shim.tokens import add_token
from tests.conftest import require_backend
from tests.support.procs import children
from tests.support.stack import BACKENDS, drop_database, fresh_database_url

pytestmark = pytest.mark.slow

GATEHOUSE = str(Path(sys.executable).parent / "gatehouse")


@dataclass
class Shim:
    base: str
    database_url: str
    tokens: dict[str, str]
    folder: Path
    pid: int

    def gatehouse(
        self, *argv: str, who: str | None = "alice", stdout: int = subprocess.PIPE
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
        env.update({"GATEHOUSE_URL": self.base, "COLUMNS": "250"})
        if who is not None:
            env["GATEHOUSE_TOKEN"] = self.tokens[who]
        return subprocess.run(
            [GATEHOUSE, *argv],
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )

    def json(self, *argv: str, who: str = "alice") -> object:
        done = self.gatehouse(*argv, "--json", who=who)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def view(self, run_id: str) -> dict[str, Any]:
        """The run over HTTP: for waiting on a status (a CLI process per poll costs a
        second of start-up; what the CLI prints is checked where it matters)."""
        r = httpx.get(
            f"{self.base}/runs/{run_id}",
            headers={"Authorization": f"Bearer {self.tokens['alice']}"},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out


@contextmanager
def _served(backend: str, folder: Path, processes: int = 1) -> Iterator[Shim]:
    """A shim on a fresh database of ``backend``, with no worker, served by
    ``processes`` processes on its one port."""
    require_backend(backend)
    url = fresh_database_url(backend, folder)
    tokens_file = folder / "tokens.json"
    people = {
        "alice": [Role.SUBMITTER, Role.OPERATOR],
        "sam": [Role.SUBMITTER],
        "bob": [Role.APPROVER, Role.OPERATOR],
    }
    tokens = {name: add_token(tokens_file, name, roles) for name, roles in people.items()}
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    with (folder / "shim.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                *(GATEHOUSE, "shim", "--port", str(port), "--database-url", url),
                *("--processes", str(processes)),
            ],
            env={**env, "GATEHOUSE_TOKENS_FILE": str(tokens_file)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield Shim(base=base, database_url=url, tokens=tokens, folder=folder, pid=proc.pid)
    finally:
        stop([proc])
        drop_database(url)


@pytest.fixture(scope="module", params=BACKENDS)
def shim(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shim]:
    """One shim per database for the tests that never start a worker; each of them
    reads only what it made itself, so they pass alone and in any order. It is served by
    two processes (``--processes 2``): whichever one takes a request answers it the same."""
    folder = tmp_path_factory.mktemp(f"cli-{request.param}")
    with _served(request.param, folder, processes=2) as served:
        yield served


@pytest.fixture(params=BACKENDS)
def lone_shim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shim]:
    """A shim of its own for the test that starts a worker (a worker would make the
    other tests' shim ready)."""
    with _served(request.param, tmp_path) as served:
        yield served


def test_version() -> None:
    done = subprocess.run([GATEHOUSE, "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("gatehouse ")


def test_processes_serve_the_one_port_each_an_application_of_its_own(shim: Shim) -> None:
    servers = [
        child
        for child in children(shim.pid)
        if "spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
    ]
    assert len(servers) == 2, children(shim.pid)
    # a connection of its own each time, taken by whichever process accepts it (which
    # one is the kernel's choice; this does not show that both answered)
    for n in range(6):
        made = shim.gatehouse("submit", "--recipe", "echo", "--objective", f"{n} of 6", "--json")
        assert made.returncode == 0, made.stderr
        assert shim.view(json.loads(made.stdout)["run_id"])["status"] == "queued"


def test_without_a_token_the_error_names_the_variable_and_the_flag(shim: Shim) -> None:
    done = shim.gatehouse("runs", who=None)
    assert done.returncode == 2
    assert "GATEHOUSE_TOKEN" in done.stderr and "--token" in done.stderr
    assert "Traceback" not in done.stderr
    wrong = shim.gatehouse("runs", "--token", "gh_not-a-token")
    assert wrong.returncode == 1 and "unauthorized" in wrong.stderr


def test_error_answers_show_their_details(shim: Shim) -> None:
    unknown = shim.gatehouse("submit", "--recipe", "nope", "--objective", "x")
    assert unknown.returncode == 1
    assert "unknown_recipe" in unknown.stderr
    assert "known: demo-inventory, echo" in unknown.stderr

    missing = shim.gatehouse("submit", "--recipe", "demo-inventory", "--objective", "x")
    assert missing.returncode == 1 and "'base_url' is a required property" in missing.stderr

    status = shim.gatehouse("runs", "--status", "bogus")
    assert status.returncode == 1
    assert "/query/status" in status.stderr and "'waiting_approval'" in status.stderr

    run_id = "run_" + "0" * 32
    digest = shim.gatehouse("approve", run_id, "--digest", "not-hex", who="bob")
    assert digest.returncode == 1
    assert "/plan_digest:" in digest.stderr, digest.stderr


def test_submit_warns_without_a_worker_and_runs_render(shim: Shim) -> None:
    assert httpx.get(f"{shim.base}/healthz").status_code == 200
    ready = httpx.get(f"{shim.base}/readyz")
    assert ready.status_code == 503
    assert any("gatehouse worker" in r for r in ready.json()["reasons"])
    queued_before = ready.json()["queue"]["queued"]

    done = shim.gatehouse(
        "submit", "--recipe", "echo", "--objective", "first of three", "--param", "n=1"
    )
    assert done.returncode == 0, done.stderr
    assert "warning: no worker of version" in done.stderr
    assert "queued" in done.stdout and "gatehouse show run_" in done.stdout
    for i in (2, 3):
        objective = f"number {i} of three"
        again = shim.gatehouse("submit", "--recipe", "echo", "--objective", objective, "--json")
        assert again.returncode == 0 and json.loads(again.stdout)["status"] == "queued"

    queue = httpx.get(f"{shim.base}/readyz").json()["queue"]
    assert queue["queued"] == queued_before + 3 and queue["oldest_queued_s"] >= 0

    table = shim.gatehouse("runs")
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0]
    for column in ("run", "status", "recipe", "submitted by", "objective", "error"):
        assert column in header
    assert "first of three" in table.stdout and "alice" in table.stdout

    page = shim.json("runs", "--limit", "2")
    assert isinstance(page, dict) and len(page["runs"]) == 2 and page["next_cursor"]
    assert f"--cursor '{page['next_cursor']}'" in shim.gatehouse("runs", "--limit", "2").stdout
    rest = shim.json("runs", "--limit", "2", "--cursor", page["next_cursor"])
    assert isinstance(rest, dict) and rest["runs"]
    first_ids = {r["run_id"] for r in page["runs"]}
    assert first_ids.isdisjoint(r["run_id"] for r in rest["runs"])


def test_a_submitter_lists_its_own_runs(shim: Shim) -> None:
    mine = shim.gatehouse("submit", "--recipe", "echo", "--objective", "sam asks", who="sam")
    assert mine.returncode == 0, mine.stderr
    hers = shim.gatehouse("submit", "--recipe", "echo", "--objective", "alice asks")
    assert hers.returncode == 0, hers.stderr
    listed = shim.json("runs", who="sam")
    assert isinstance(listed, dict) and {r["submitted_by"] for r in listed["runs"]} == {"sam"}
    every = shim.json("runs", "--limit", "200", who="alice")
    assert isinstance(every, dict) and {"sam", "alice"} <= {
        r["submitted_by"] for r in every["runs"]
    }


def test_a_closed_pipe_is_quiet(shim: Shim) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written, like `| head -0`
    try:
        done = shim.gatehouse("runs", stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 141
    assert done.stderr == ""


def test_read_commands_print_tables_and_json(shim: Shim) -> None:
    recipes = shim.gatehouse("recipes")
    assert recipes.returncode == 0 and "demo-inventory" in recipes.stdout
    assert "base_url" in recipes.stdout  # its required parameter
    policies = shim.gatehouse("policies")
    assert policies.returncode == 0 and "auto-read-only" in policies.stdout
    one = shim.json("policies", "default")
    assert isinstance(one, dict) and one["profile"]["digest"]
    unknown = shim.gatehouse("submit", "--recipe", "nope", "--objective", "x")
    assert unknown.returncode == 1  # refused, and recorded as a security event
    made = shim.json("submit", "--recipe", "echo", "--objective", "read me")
    assert isinstance(made, dict)
    events = shim.json("security-events", "--limit", "5")
    assert isinstance(events, dict) and events["security_events"]
    assert "gatehouse:unknown_recipe" in shim.gatehouse("security-events").stdout
    workers = shim.gatehouse("workers")
    assert workers.returncode == 0 and "executor_id" in workers.stdout

    run_id = made["run_id"]
    for argv in (["episodes", run_id], ["artifacts", "list", run_id], ["ledger", "show", run_id]):
        assert shim.gatehouse(*argv).returncode == 0, argv
        assert isinstance(shim.json(*argv), dict), argv
    verify = shim.gatehouse("ledger", "verify", run_id)
    assert verify.returncode == 0 and "Ledger chain intact" in verify.stdout
    forbidden = shim.gatehouse("workers", who="sam")
    assert forbidden.returncode == 1 and "forbidden" in forbidden.stderr


def test_a_worker_makes_it_ready_and_the_plan_card_renders(lone_shim: Shim) -> None:
    shim = lone_shim
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    env.update(
        {
            "GATEHOUSE_DATABASE_URL": shim.database_url,
            "GATEHOUSE_EXECUTOR_ID": "cli-worker",
            "GATEHOUSE_WORKSPACE_ROOT": str(shim.folder / "workspaces"),
            "GATEHOUSE_OPENCODE_STATE": str(shim.folder / "opencode"),
        }
    )
    with (shim.folder / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [GATEHOUSE, "worker"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 90
        while httpx.get(f"{shim.base}/readyz").status_code != 200:
            assert time.monotonic() < deadline, "no worker became live"
            assert worker.poll() is None, (shim.folder / "worker.log").read_text()
            time.sleep(0.3)
        listed = shim.gatehouse("workers")
        row = next(line for line in listed.stdout.splitlines() if "cli-worker" in line)
        assert "true" in row and "s ago" in row and "template" in row

        done = shim.gatehouse("submit", "--recipe", "echo", "--objective", "card", "--json")
        assert done.returncode == 0 and "warning" not in done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        deadline = time.monotonic() + 60
        view: dict[str, Any] = {}
        while not (isinstance(view, dict) and view.get("status") == "waiting_approval"):
            assert time.monotonic() < deadline, (
                view.get("status") if isinstance(view, dict) else view
            )
            time.sleep(0.3)
            view = shim.view(run_id)
        card = shim.gatehouse("show", run_id, who="bob")  # an approver
        assert card.returncode == 0
        assert isinstance(view, dict)
        digest = view["plan_card"]["plan_digest"]
        for text in ("Plan card", digest, "none yet", "gatehouse approve", "noop", "not run"):
            assert text in card.stdout, text
        # a reader who may not approve (a submitter and operator) is not told to
        assert "gatehouse approve" not in shim.gatehouse("show", run_id).stdout
        approved = shim.gatehouse("approve", run_id, who="bob")
        assert approved.returncode == 0, approved.stderr
        deadline = time.monotonic() + 60
        while view.get("status") not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, view
            time.sleep(0.3)
            view = shim.view(run_id)
        assert view["status"] == "succeeded"
        final = shim.gatehouse("show", run_id).stdout
        assert "approved by bob" in final and "succeeded" in final

        replay = shim.gatehouse("replay", run_id)
        assert replay.returncode == 0, replay.stderr
        assert "Replay: trace digest matches" in replay.stdout
        assert "Divergences" not in replay.stdout
        explain = shim.gatehouse("explain", run_id)  # no model configured: refused, one line
        assert explain.returncode == 1 and "explain_unavailable" in explain.stderr

        _artifacts_round_trip(shim)

        _follow_with_wait(shim)

        again = shim.gatehouse("submit", "--recipe", "echo", "--objective", "stop me", "--json")
        other = json.loads(again.stdout)["run_id"]
        _wait_status(shim, other, {"waiting_approval"})
        cancel = shim.gatehouse("cancel", other, "--reason", "not needed")
        assert cancel.returncode == 0, cancel.stderr
        assert f"Cancel of {other}" in cancel.stdout and "not needed" in cancel.stdout
    finally:
        stop([worker])


def _follow_with_wait(shim: Shim) -> None:
    """``--wait``: submit follows the run to its plan card, approve to its end, reject
    ends in exit 1; progress goes to stderr, the card (or its JSON) to stdout."""
    argv = ("submit", "--recipe", "echo", "--objective", "follow me", "--wait", "50")
    waited = shim.gatehouse(*argv, "--json")
    assert waited.returncode == 0, waited.stderr
    view = json.loads(waited.stdout)
    run_id = view["run_id"]
    assert view["status"] == "waiting_approval"
    assert f"{run_id}: waiting_approval (approval)" in waited.stderr
    followed = shim.gatehouse("approve", run_id, "--wait", who="bob")
    assert followed.returncode == 0, followed.stderr
    assert f"{run_id}: succeeded" in followed.stderr and "  step " in followed.stderr
    assert "approved by bob" in followed.stdout and "succeeded" in followed.stdout
    refused = json.loads(shim.gatehouse(*argv, "--json").stdout)["run_id"]
    rejected = shim.gatehouse("reject", refused, "--wait", "50", who="bob")
    assert rejected.returncode == 1 and f"{refused}: rejected" in rejected.stderr


def _wait_status(shim: Shim, run_id: str, wanted: set[str]) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while True:
        view = shim.view(run_id)
        if view["status"] in wanted:
            return view
        assert time.monotonic() < deadline, view["status"]
        time.sleep(0.3)


def _artifacts_round_trip(shim: Shim) -> None:
    """A run with artifacts: listed, fetched byte for byte, its ledger shown call by call."""
    with InventoryService() as inventory:
        done = shim.gatehouse(
            "submit",
            "--recipe",
            "demo-inventory",
            "--objective",
            "stock",
            "--param",
            f"base_url={inventory.base_url}",
            "--json",
        )
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        _wait_status(shim, run_id, {"waiting_approval"})
        assert shim.gatehouse("approve", run_id, who="bob").returncode == 0
        assert _wait_status(shim, run_id, {"succeeded", "failed"})["status"] == "succeeded"
    listed = shim.json("artifacts", "list", run_id)
    assert isinstance(listed, dict) and listed["artifacts"]
    first = listed["artifacts"][0]
    table = shim.gatehouse("artifacts", "list", run_id).stdout
    assert first["sha256"] in table and f"gatehouse artifacts get {first['sha256']}" in table
    target = shim.folder / "artifact.bin"
    got = shim.gatehouse("artifacts", "get", first["sha256"], "-o", str(target))
    assert got.returncode == 0, got.stderr
    assert hashlib.sha256(target.read_bytes()).hexdigest() == first["sha256"]
    assert target.stat().st_size == first["size_bytes"]
    ledger = shim.gatehouse("ledger", "show", run_id).stdout
    for step in ("@compile", "fetch", "checksum"):
        assert step in ledger, step
    missing = shim.gatehouse("artifacts", "get", "0" * 64)
    assert missing.returncode == 1 and "artifact_not_found" in missing.stderr
