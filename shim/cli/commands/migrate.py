"""``gatehouse migrate``: create or upgrade the database schema (and DBOS's tables, the views)."""

from __future__ import annotations

import argparse
import sys

from shim.cli.database import refuse_bad_url, require_database, set_up, waited_for
from shim.cli.errors import Exit
from shim.cli.options import database_option, database_url, database_wait_option

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    database_option(p)
    database_wait_option(p)


def run(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    # PostgreSQL: migrate creates the database when the server answers but it is missing.
    if url.startswith("sqlite:///"):
        require_database(url, source)
    else:
        refuse_bad_url(url, source)
    applied, _ = waited_for(args.wait_for_database, lambda: set_up(url, source))
    sys.stdout.write(f"migrated: applied {applied or 'nothing new'}\n")
    return Exit.OK
