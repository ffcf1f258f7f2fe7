"""``gatehouse database-url``: the database the client commands would use here, and why.

For tools that are not Gatehouse's, the DBOS CLI first: from a second terminal,
``dbos workflow list -s "$(gatehouse database-url)"`` reads the stack ``gatehouse up``
runs, where a bare ``dbos workflow list`` (which knows only ``dbos-config.yaml`` and
the environment) would fail on a database it cannot find.
"""

from __future__ import annotations

import argparse
import sys

from shim.cli.errors import Exit
from shim.cli.options import database_option, database_url

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = 'e.g. dbos workflow list -s "$(gatehouse database-url)"'
    database_option(p)


def run(args: argparse.Namespace) -> int:
    url, source = database_url(args)
    sys.stdout.write(url + "\n")
    sys.stderr.write(f"gatehouse: from {source}\n")
    return Exit.OK
