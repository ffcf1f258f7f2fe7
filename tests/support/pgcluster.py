"""A private, throwaway PostgreSQL cluster that tests may crash at will.

The machine's shared server (127.0.0.1:5432) is used by other test runs and is
never restarted. Tests that need to kill or restart the database get their own
cluster instead: ``initdb`` into a temporary folder, trust authentication,
listening on 127.0.0.1 at a free port, its Unix socket inside that folder.

PostgreSQL refuses to run as root. When the tests run as root, ``initdb`` and
``pg_ctl`` run as the ``postgres`` user (``runuser``) and the folder is handed
to that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

__all__ = ["PgCluster", "unavailable_reason"]

_BIN_CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")
_RUN_AS = "postgres"

# Durability against a *process* crash (kill -9, pg_ctl -m immediate) needs the
# WAL written to the kernel at commit, which synchronous_commit=on (the default)
# gives; fsync only matters when the machine itself goes down, which no test does.
_SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 300
fsync = off
full_page_writes = off
shared_buffers = 64MB
logging_collector = off
log_min_messages = warning
"""


def _bin_dir() -> Path | None:
    configured = os.environ.get("GATEHOUSE_TEST_PG_BIN")
    for folder in ([configured] if configured else []) + list(_BIN_CANDIDATES):
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def unavailable_reason() -> str | None:
    """Why a private cluster cannot be made here, or None when it can."""
    if _bin_dir() is None:
        return "initdb/pg_ctl not found (set GATEHOUSE_TEST_PG_BIN to PostgreSQL's bin folder)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_RUN_AS)
        except KeyError:
            return f"running as root and there is no {_RUN_AS!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is not available"
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _plain(name: str) -> None:
    """Refuse a name that is not a plain identifier (it is spliced into DDL)."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a plain identifier: {name!r}")


class PgCluster:
    """``with PgCluster() as pg: pg.url("gatehouse")`` — started on enter, removed on exit."""

    def __init__(self) -> None:
        reason = unavailable_reason()
        bin_dir = _bin_dir()
        if reason is not None or bin_dir is None:
            raise RuntimeError(f"cannot make a private PostgreSQL cluster: {reason}")
        self.bin = bin_dir
        # Directly under the temp root: PostgreSQL's user must be able to reach it.
        self.root = Path(tempfile.mkdtemp(prefix="gh-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log = self.root / "postgres.log"
        self.port = _free_port()
        self.restarts = 0
        self.terminated_backends = 0
        self._as_root = os.geteuid() == 0
        self.socket_dir.mkdir()
        if self._as_root:
            entry = pwd.getpwnam(_RUN_AS)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(_SETTINGS.format(port=self.port, socket_dir=self.socket_dir))

    # ------------------------------------------------------------ processes
    def _run(
        self, program: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin / program), *args]
        if self._as_root:
            argv = ["runuser", "-u", _RUN_AS, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{program} failed ({done.returncode}): {done.stderr or done.stdout}"
            )
        return done

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``immediate`` is a crash (no checkpoint, clients cut off)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "immediate", down_s: float = 0.0) -> None:
        """Stop (a crash, by default), stay down ``down_s`` seconds, start again."""
        self.stop(mode)
        if down_s > 0:
            time.sleep(down_s)
        self.start()
        self.restarts += 1

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._execute("postgres", "SELECT 1")
                return
            except sa.exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # ------------------------------------------------------------ SQL
    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _execute(self, dbname: str, statement: str, **params: str) -> list[tuple[object, ...]]:
        engine = sa.create_engine(
            self.url(dbname).replace("postgresql://", "postgresql+psycopg://", 1),
            isolation_level="AUTOCOMMIT",
            poolclass=sa.NullPool,
            connect_args={"connect_timeout": 3},
        )
        try:
            with engine.connect() as conn:
                result = conn.execute(sa.text(statement), params)
                return [tuple(r) for r in result.all()] if result.returns_rows else []
        finally:
            engine.dispose()

    def create_database(self, dbname: str, tablespace: str | None = None) -> str:
        """Create ``dbname`` (a plain identifier), in ``tablespace`` when given, and
        return its URL."""
        _plain(dbname)
        if tablespace is not None:
            _plain(tablespace)
        where = f' TABLESPACE "{tablespace}"' if tablespace else ""
        self._execute("postgres", f'CREATE DATABASE "{dbname}"{where}')
        return self.url(dbname)

    def create_tablespace(self, name: str, location: Path) -> None:
        """A tablespace ``name`` (a plain identifier) in the empty folder ``location``,
        which is given to the server's user first. Tables there fill ``location``'s
        filesystem; the WAL and the catalogs stay in the data directory."""
        _plain(name)
        location.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            entry = pwd.getpwnam(_RUN_AS)
            os.chown(location, entry.pw_uid, entry.pw_gid)
        literal = str(location).replace("'", "''")
        self._execute("postgres", f"CREATE TABLESPACE \"{name}\" LOCATION '{literal}'")

    def terminate_backends(self, dbname: str) -> int:
        """``pg_terminate_backend`` every other connection to ``dbname``; how many ended."""
        rows = self._execute(
            "postgres",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = :db AND pid <> pg_backend_pid()",
            db=dbname,
        )
        ended = sum(1 for (ok,) in rows if ok)
        self.terminated_backends += ended
        return ended

    def query(self, dbname: str, statement: str, **params: str) -> list[tuple[object, ...]]:
        return self._execute(dbname, statement, **params)

    # ------------------------------------------------------------ lifetime
    def cleanup(self) -> None:
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgCluster:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cleanup()
