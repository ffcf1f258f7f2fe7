"""The CLI commands that work on this machine: migrate, shim, sql (tokens: ``_tokens_cli``).

Each turns what goes wrong at the edge — a database that is down, a missing
tokens file, a bad flag — into one line on stderr that names the fix, and a
non-zero exit (see ``shim.cli`` for the codes). No traceback reaches a person
for a problem they can fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import sqlalchemy as sa

from contracts import GatehouseError
from ledger import (
    add_missing_views,
    database_unreachable,
    migrate,
    open_database,
    resolve_database_url,
    resolve_tls,
)
from ledger.operator import read_only_query
from ledger.readonly import READONLY_ROLE, create_readonly_role
from shim._render import console, records
from shim.local import serve_shim

__all__ = [
    "DEFAULT_TOKENS_FILE",
    "check_database",
    "database_url",
    "run_migrate",
    "run_shim",
    "run_sql",
]

DEFAULT_TOKENS_FILE = "var/tokens.json"
_SCHEMES = ("sqlite:///", "postgresql://", "postgres://", "postgresql+psycopg://")
USAGE, FAILED = 2, 1


def _err(text: str) -> None:
    sys.stderr.write(f"gatehouse: {text}\n")


def database_url(args: argparse.Namespace) -> tuple[str, str]:
    """(url, where it came from): the flag, the variable, dbos-config.yaml, the default."""
    if args.database_url is not None:
        return args.database_url, "--database-url"
    return resolve_database_url()


def _shown(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _bad_url(url: str, source: str) -> str | None:
    """Why ``url`` (from ``source``) cannot be a database URL, or None."""
    if not url.strip():
        hint = " (is the variable you passed to it set?)" if source == "--database-url" else ""
        return f"{source} is empty{hint}; give sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
    if not url.startswith(_SCHEMES):
        return f"{source} must start with sqlite:/// or postgresql:// (got {_shown(url)!r})"
    return None


def _unreachable(url: str, source: str, exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return (
        f"cannot reach the database {_shown(url)} ({source}): {first}. Start it, or point"
        " --database-url / GATEHOUSE_DATABASE_URL at one that runs"
    )


def check_database(url: str, source: str) -> tuple[int, str] | None:
    """None if the database at ``url`` answers; else (exit code, the line to print):
    a URL that cannot be one is a usage error, a database that does not answer a failure."""
    bad = _bad_url(url, source)
    if bad:
        return USAGE, bad
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        if url.startswith("sqlite:///"):
            folder = Path(url.removeprefix("sqlite:///")).parent
            if not folder.is_dir():
                return USAGE, f"no folder {folder} for the SQLite file of {source}: create it first"
        return FAILED, _unreachable(url, source, exc)
    finally:
        db.dispose()
    return None


def _refused(url: str, source: str) -> int | None:
    """The exit code after printing why the database cannot be used; None if it can."""
    problem = check_database(url, source)
    if problem is None:
        return None
    _err(problem[1])
    return problem[0]


def _set_up(url: str, source: str) -> tuple[list[int], list[str]] | int:
    """Migrations, DBOS's tables, the views: (migrations applied now, views), or the exit
    code after saying the database cannot be reached."""
    from dbos import DBOS  # noqa: PLC0415  (heavy to import: only these commands need it)

    db = open_database(url)
    try:
        applied = migrate(db)
        DBOS.migrate(url)
        return applied, add_missing_views(db)  # DBOS's tables made: the views over them too
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        _err(_unreachable(url, source, exc))
        return FAILED
    finally:
        db.dispose()


def run_migrate(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    # (PostgreSQL: migrate creates the database when the server answers but it is missing)
    checked = url.startswith("sqlite:///") or _bad_url(url, source)
    if checked and (code := _refused(url, source)) is not None:
        return code
    done = _set_up(url, source)
    if isinstance(done, int):
        return done
    sys.stdout.write(f"migrated: applied {done[0] or 'nothing new'}\n")
    return 0


def run_readonly_role(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    if url.startswith("sqlite"):
        _err(
            "a read-only role is PostgreSQL's; a SQLite file is read without writing by"
            " `gatehouse sql` or `sqlite3 -readonly`"
        )
        return USAGE
    if _bad_url(url, source) is not None and (code := _refused(url, source)) is not None:
        return code
    done = _set_up(url, source)
    if isinstance(done, int):
        return done
    db = open_database(url)
    try:
        password = os.environ.get("GATEHOUSE_READONLY_PASSWORD") or None
        created = create_readonly_role(db, done[1], password)
    finally:
        db.dispose()
    sys.stdout.write(
        f"role {READONLY_ROLE} {'created' if created else 'already there'}: SELECT on"
        f" {', '.join(done[1])} (schema gatehouse), nothing else\n"
    )
    return 0


def run_shim(args: argparse.Namespace) -> int:
    tokens = Path(args.tokens_file)
    if not tokens.is_file():
        _err(
            f"no tokens file at {tokens}: create one with `gatehouse tokens add NAME"
            f" --roles submitter,approver,operator --file {tokens}` (or start with `gatehouse up`,"
            " which makes two identities), or pass --tokens-file / set GATEHOUSE_TOKENS_FILE"
        )
        return USAGE
    url, source = database_url(args)
    if (code := _refused(url, source)) is not None:
        return code
    tls = resolve_tls(args.tls_cert, args.tls_key)
    serve_shim(url, args.host, args.port, tokens, tls)


def run_sql(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    if (code := _refused(url, source)) is not None:
        return code
    db = open_database(url)
    try:
        columns, rows = read_only_query(db, args.query)
    except GatehouseError as exc:
        _err(exc.message)
        return FAILED
    finally:
        db.dispose()
    if args.json:
        listed = [dict(zip(columns, r, strict=True)) for r in rows]
        sys.stdout.write(json.dumps(listed, indent=2) + "\n")
        return 0
    console().print(
        records(
            f"{len(rows)} row(s)",
            columns,
            [dict(zip(columns, r, strict=True)) for r in rows],
            limit=500,
        )
    )
    return 0
