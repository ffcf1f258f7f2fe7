"""``gatehouse up`` refuses to start a second stack, with the real reason.

A port in use would let the new stack's health check reach the old stack's
shim; an executor id that still sends heartbeats would put two workers under
one id, recovering each other's runs.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from contracts import APP_VERSION
from ledger import executors, migrate, now_iso, open_database
from shim.local import free_port, in_use
from tests.conftest import require_backend
from tests.e2e.test_cli_edges import _one_line, _run
from tests.support.stack import BACKENDS, drop_database, fresh_database_url


def test_up_refuses_a_portin_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        url = f"sqlite:///{tmp_path}/gatehouse.sqlite"
        done = _run("up", "--port", str(port), "--database-url", url, cwd=tmp_path)
    assert done.returncode == 1
    line = _one_line(done)
    assert f"port {port} is in use" in line and "--port" in done.stderr
    assert "another program listens there (not a Gatehouse shim)" in line
    assert not (tmp_path / "var").exists()  # nothing was started or written


@pytest.mark.parametrize("backend", BACKENDS)
def test_up_refuses_executor_ids_another_stack_runs(tmp_path: Path, backend: str) -> None:
    require_backend(backend)
    url = fresh_database_url(backend, tmp_path)
    db = open_database(url)
    try:
        migrate(db)
        with db.engine.begin() as conn:  # worker-1 of another stack, alive right now
            executors.heartbeat(
                conn,
                executor_id="worker-1",
                app_version=APP_VERSION,
                hostname="elsewhere",
                pid=4242,
                now=now_iso(),
            )
        port = str(free_port())
        done = _run("up", "--port", port, "--database-url", url, cwd=tmp_path)
        assert done.returncode == 1, done.stdout + done.stderr
        line = _one_line(done)
        assert "worker-1 (host elsewhere, pid 4242" in line and "Another stack" in line
        assert not (tmp_path / "var").exists()
    finally:
        db.dispose()
        drop_database(url)


def test_a_database_that_is_away_is_no_refusal(tmp_path: Path) -> None:
    """up starts before its database may (its workers wait for it): nothing to compare yet."""
    away = f"postgresql://postgres@127.0.0.1:{free_port()}/gatehouse"
    assert in_use(away, free_port(), ["worker-1"]) is None
    fresh = f"sqlite:///{tmp_path}/fresh.sqlite"  # never migrated: no worker ever ran there
    assert in_use(fresh, free_port(), ["worker-1"]) is None


def test_a_port_left_in_time_wait_is_free(tmp_path: Path) -> None:
    """The last stack's clients leave its port in TIME_WAIT for a minute; uvicorn binds
    it at once (SO_REUSEADDR), so the refusal must not stop a restart either."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's end closes first: it is the one in TIME_WAIT
        client.close()
    fresh = f"sqlite:///{tmp_path}/fresh.sqlite"
    assert in_use(fresh, port, ["worker-1"]) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_of_this_host_whose_process_is_gone_is_not_live(
    tmp_path: Path, backend: str
) -> None:
    """Ctrl-C, then `gatehouse up` again at once: the stopped worker's last heartbeat is a
    second old, but its pid is gone on this host, so the restart is not refused."""
    require_backend(backend)
    gone = subprocess.Popen(["true"])
    gone.wait()
    url = fresh_database_url(backend, tmp_path)
    db = open_database(url)
    try:
        migrate(db)
        with db.engine.begin() as conn:
            for executor_id, pid in (("worker-1", gone.pid), ("worker-2", os.getpid())):
                executors.heartbeat(
                    conn,
                    executor_id=executor_id,
                    app_version=APP_VERSION,
                    hostname=socket.gethostname(),
                    pid=pid,
                    now=now_iso(),
                )
        assert in_use(url, free_port(), ["worker-1"]) is None
        alive = in_use(url, free_port(), ["worker-1", "worker-2"])  # this process is alive
        assert alive is not None and f"worker-2 (host {socket.gethostname()}" in alive
        assert "worker-1" not in alive
    finally:
        db.dispose()
        drop_database(url)
