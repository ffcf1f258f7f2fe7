"""``gatehouse ledger``: a run's ledger (``show``), or its hash chain verified (``verify``)."""

from __future__ import annotations

import argparse

from contracts import JsonValue
from shim.cli.client import dump
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import show
from shim.cli.render import fields, ledger_table

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("action", choices=["show", "verify"], help="show the rows, or verify the chain")
    run_id_argument(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        if args.action == "show":
            calls = api.ledger(args.run_id)
            show(args, {"calls": dump(calls)}, ledger_table(calls))
            return Exit.OK
        out = api.verify_ledger(args.run_id)
    ok = isinstance(out, dict) and out.get("ok") is True
    info: dict[str, JsonValue] = dict(out) if isinstance(out, dict) else {"answer": out}
    show(args, out, fields("Ledger chain " + ("intact" if ok else "BROKEN"), info))
    return Exit.OK if ok else Exit.CHECK_FAILED
