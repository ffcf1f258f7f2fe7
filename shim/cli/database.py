"""The database a local command works on, checked before it is used.

Each thing that goes wrong at this edge — a URL that cannot be one, a folder
that is not there, a database that does not answer — becomes one line naming
the fix: a usage error when the person can fix the command, a failure when
the database is away. No traceback reaches a person for a problem they can fix.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from ledger import (
    CONFIG_FILE,
    add_missing_views,
    database_unreachable,
    migrate,
    open_database,
)
from shim.cli.errors import FailedError, UnreachableError, UsageError

__all__ = ["refuse_bad_url", "require_database", "set_up", "waited_for"]

T = TypeVar("T")
_BACKOFF_CAP_S = 5.0

_SCHEMES = ("sqlite:///", "postgresql://", "postgres://", "postgresql+psycopg://")


def _shown(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def refuse_bad_url(url: str, source: str) -> None:
    """A usage error when ``url`` (from ``source``) cannot be a database URL."""
    if not url.strip():
        hint = " (is the variable you passed to it set?)" if source == "--database-url" else ""
        raise UsageError(
            f"{source} is empty{hint}; give sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
        )
    if not url.startswith(_SCHEMES):
        raise UsageError(
            f"{source} must start with sqlite:/// or postgresql:// (got {_shown(url)!r})"
        )


def _unreachable(url: str, source: str, exc: BaseException) -> UnreachableError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return UnreachableError(
        f"cannot reach the database {_shown(url)} ({source}): {first}. Start it, or point"
        " --database-url / GATEHOUSE_DATABASE_URL at one that runs"
    )


def waited_for(wait_s: float, attempt: Callable[[], T]) -> T:
    """``attempt()``, tried again while the database does not answer, for ``wait_s`` seconds.

    A service started beside its database (compose, Kubernetes) waits for it this way
    instead of counting on the orchestrator's start order: a line on stderr for each
    try that failed, the next after 0.5 s, 1 s, 2 s … up to 5 s. Past ``wait_s`` (0:
    no wait) the last failure is raised, naming the fix. Only a database that does not
    answer is waited out; any other failure is raised at once.
    """
    deadline = time.monotonic() + max(wait_s, 0.0)
    delay, tries = 0.5, 0
    while True:
        tries += 1
        try:
            return attempt()
        except UnreachableError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            pause = min(delay, left)
            sys.stderr.write(
                f"gatehouse: the database does not answer (try {tries}); trying again in"
                f" {pause:.1f} s, for {left:.0f} s more (--wait-for-database)\n"
            )
            time.sleep(pause)
            delay = min(delay * 2, _BACKOFF_CAP_S)


def require_database(url: str, source: str, *, read_only: bool = False) -> None:
    """Return once the database at ``url`` answers; a URL that cannot be one is a usage
    error, a database that does not answer a failure. ``read_only``: a SQLite file that
    is not there is a failure naming the URL tried, never created (opening it would
    make an empty one, and the next command would read that instead of the stack's)."""
    refuse_bad_url(url, source)
    if read_only and url.startswith("sqlite:///"):
        file = Path(url.removeprefix("sqlite:///"))
        if not file.is_file():
            raise FailedError(
                f"no database at {url} ({source}); this command reads one and never creates"
                " it. Give the database the stack was started with, as gatehouse up found"
                " it: --database-url, GATEHOUSE_DATABASE_URL, or system_database_url in"
                f" ./{CONFIG_FILE} (run this command in the stack's folder)"
            )
    db = open_database(url)
    try:
        db.ping()
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        if url.startswith("sqlite:///"):
            folder = Path(url.removeprefix("sqlite:///")).parent
            if not folder.is_dir():
                raise UsageError(
                    f"no folder {folder} for the SQLite file of {source}: create it first"
                ) from exc
        raise _unreachable(url, source, exc) from exc
    finally:
        db.dispose()


def set_up(url: str, source: str) -> tuple[list[int], list[str]]:
    """Migrations, DBOS's tables, the views: (migrations applied now, the views)."""
    from dbos import DBOS  # noqa: PLC0415  (heavy to import: only these commands need it)

    db = open_database(url)
    try:
        applied = migrate(db)
        DBOS.migrate(url)
        return applied, add_missing_views(db)  # DBOS's tables made: the views over them too
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        raise _unreachable(url, source, exc) from exc
    finally:
        db.dispose()
