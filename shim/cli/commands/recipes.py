"""``gatehouse recipes``: the recipes one may submit, with their required parameters."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import rows, show
from shim.cli.render import records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        raw = api.get_json("/recipes")
    listed = rows(raw, "recipes")
    for r in listed:
        schema = r.get("parameters_schema")
        needed = schema.get("required") if isinstance(schema, dict) else None
        names = [str(n) for n in needed] if isinstance(needed, list) else []
        r["required parameters"] = ", ".join(names) or "-"
    cols = ["recipe_id", "title", "planner", "required parameters", "digest"]
    show(args, raw, records("Recipes", cols, listed, limit=64))
    return Exit.OK
