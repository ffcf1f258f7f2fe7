"""``gatehouse sql``: one read-only query against the database, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from contracts import GatehouseError, JsonValue
from ledger import open_database
from ledger.operator import read_only_query
from shim.cli.database import require_database
from shim.cli.errors import Exit, FailedError
from shim.cli.options import database_option, database_url, json_option
from shim.cli.render import print_records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="one SELECT; it runs in a read-only transaction")
    database_option(p)
    json_option(p, "the rows", form="JSON objects")


def run(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    require_database(url, source, read_only=True)
    db = open_database(url)
    try:
        columns, rows = read_only_query(db, args.query)
    except GatehouseError as exc:
        raise FailedError(exc.message) from exc
    finally:
        db.dispose()
    listed: list[dict[str, JsonValue]] = [dict(zip(columns, r, strict=True)) for r in rows]
    if args.json:
        sys.stdout.write(json.dumps(listed, indent=2) + "\n")
        return Exit.OK
    # wider than the terminal: a table would cut ids, one line per cell cuts none
    print_records(f"{len(rows)} row(s)", columns, listed, limit=500)
    return Exit.OK
