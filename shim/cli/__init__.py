"""The ``gatehouse`` command: one module per command, never the HTTP API's code.

Commands that start or set up processes (demo, up, shim, worker, migrate)
call the local stack (``shim.local``) or become another program; sql, tokens
and evidence work on this machine's files and database; the rest talk to a
running shim over HTTP (``--url`` or ``GATEHOUSE_URL``, default
http://127.0.0.1:8000).

    _main.py      build_parser, main: parse, import and run the one command named
    commands/     one module per command; COMMANDS, the literal registry of their names
    errors.py     Exit (the exit codes), the errors commands raise
    failure.py    what an error that reached main means, and printing it (imported then)
    printable.py  text from runs shown as data: control and bidi characters as escapes
    options.py    the options several commands share (--url, --token, --ca, --json, …)
    output.py     answers on stdout, notes and progress on stderr
    client.py     the HTTP client (contract models in, contract models out)
    render.py     tables for people (rich)
    database.py   the database a local command works on, checked first
    follow.py     --wait: a run followed until it is over or waits for a person
    decisions.py  what approve and reject share
    watch.py      runs watch: a run's event stream in the terminal
"""

from shim.cli._main import build_parser, main
from shim.cli.commands import COMMANDS
from shim.cli.errors import EXIT_CODES, Exit

__all__ = ["COMMANDS", "EXIT_CODES", "Exit", "build_parser", "main"]
