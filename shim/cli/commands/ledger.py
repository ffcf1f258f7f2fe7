"""``gatehouse ledger``: a run's ledger (``show``), or its hash chain verified (``verify``)."""

from __future__ import annotations

import argparse
from contextlib import suppress
from pathlib import Path

from contracts import JsonValue
from shim.cli.client import dump
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect, run_id_argument
from shim.cli.output import show
from shim.cli.render import fields, ledger_table, short

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
    records = info.pop("records", None)
    if "anchored" in info:
        info["anchored"] = _anchored(info["anchored"])
    table = fields("Ledger chain " + ("intact" if ok else "BROKEN"), info)
    if isinstance(records, dict):
        checked, said = records.get("checked"), records.get("not_covered")
        parts = [] if not isinstance(said, list) else [str(x) for x in said]
        if isinstance(checked, dict):  # the families held, with rows; none held is said
            held = ", ".join(f"{name} {n}" for name, n in checked.items() if n)
            parts.insert(0, held or "none of the run's other records held")
        # shown whole, not cut: a cut could drop the very thing that is not covered
        table.add_row("records", short("; ".join(parts), 4000))
    show(args, out, table)
    return Exit.OK if ok else Exit.CHECK_FAILED


def _anchored(value: JsonValue) -> JsonValue:
    """The checkpoints the chain was held to, in words: how many in each place. Each
    is written in the database and as a line of the anchor file, so the places are
    counted apart: the database's count is the one an evidence bundle carries."""
    by_source = value.get("by_source") if isinstance(value, dict) else None
    if not isinstance(value, dict) or not isinstance(by_source, dict):
        return value  # a shim from before the count per place: its answer as it came
    if not by_source:
        return "no checkpoint yet: one is written when the run ends"
    # the database first, as a bundle counts it; then each file, as the reader would type it
    places = sorted(by_source.items(), key=lambda kv: kv[0] != "the database")
    where = ", ".join(f"{n} in {_as_typed(place)}" for place, n in places)
    return f"checkpoints {where}; {value.get('entries')} entries; {value.get('signed')} signed"


def _as_typed(place: str) -> str:
    """An anchor file's path from here when it lies under this folder (``gatehouse up``
    names it absolute: var/anchors.jsonl of the stack run from here), else as given."""
    path = Path(place)
    if not path.is_absolute():
        return place
    with suppress(ValueError):  # not under this folder
        return str(path.relative_to(Path.cwd()))
    return place
