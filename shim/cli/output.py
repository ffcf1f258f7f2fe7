"""Where a command's words go: answers on stdout, everything about them on stderr.

An answer is the API's JSON as it came (``--json``) or the tables of
``shim.cli.render``; notes, warnings, progress and errors go to stderr, each
line after ``gatehouse:``, so a pipe gets the answer alone.
"""

from __future__ import annotations

import argparse
import json
import sys

from pydantic import BaseModel

from contracts import JsonValue
from shim.cli.client import dump
from shim.cli.render import console, fields

__all__ = ["answer", "note", "progress", "rows", "show", "write_json"]


def note(text: str) -> None:
    """A line for the person, not the pipe: ``gatehouse: TEXT`` on stderr."""
    sys.stderr.write(f"gatehouse: {text}\n")


def progress(line: str) -> None:
    """A line of a followed run's progress, on stderr as it happens."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def write_json(value: JsonValue) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def show(args: argparse.Namespace, raw: JsonValue, *tables: object) -> None:
    """The answer: ``raw`` with --json, else the tables, a blank line between."""
    if args.json:
        write_json(raw)
        return
    out = console()
    for i, t in enumerate(tables):
        if i:
            out.print()
        out.print(t)


def answer(args: argparse.Namespace, title: str, model: BaseModel) -> None:
    """A small answer (accepted, decided, …) as name / value rows, with where to look next."""
    raw = dump(model)
    info: dict[str, JsonValue] = dict(raw) if isinstance(raw, dict) else {"answer": raw}
    links = info.pop("links", None)
    if isinstance(links, dict) and isinstance(info.get("run_id"), str):
        info["next"] = f"gatehouse show {info['run_id']}"
    show(args, raw, fields(title, info))


def rows(raw: JsonValue, key: str) -> list[dict[str, JsonValue]]:
    """The objects listed under ``key`` of a JSON answer (none when it has none)."""
    found = raw.get(key) if isinstance(raw, dict) else None
    return [r for r in (found if isinstance(found, list) else []) if isinstance(r, dict)]
