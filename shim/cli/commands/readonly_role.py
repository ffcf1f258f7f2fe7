"""``gatehouse readonly-role``: this database's PostgreSQL login that may read its views only."""

from __future__ import annotations

import argparse
import os
import sys

from ledger import open_database
from ledger.readonly import create_readonly_role
from shim.cli.database import refuse_bad_url, set_up
from shim.cli.errors import Exit, UsageError
from shim.cli.options import database_option, database_url

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "GATEHOUSE_READONLY_PASSWORD, when set, becomes the role's password."
    database_option(p)


def run(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    if url.startswith("sqlite"):
        raise UsageError(
            "a read-only role is PostgreSQL's; a SQLite file is read without writing by"
            " `gatehouse sql` or `sqlite3 -readonly`"
        )
    refuse_bad_url(url, source)
    _, views = set_up(url, source)
    db = open_database(url)
    try:
        password = os.environ.get("GATEHOUSE_READONLY_PASSWORD") or None
        role, created = create_readonly_role(db, views, password)
    finally:
        db.dispose()
    sys.stdout.write(
        f"role {role} {'created' if created else 'already there'}: SELECT on"
        f" {', '.join(views)} (schema gatehouse of this database), nothing else\n"
    )
    return Exit.OK
