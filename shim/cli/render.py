"""What the CLI prints for people: rich tables, the demo's look everywhere.

Every read command also has ``--json`` (the API's answer as it came); this
module is only the human side. Text from runs (objectives, step output) is
printed as data, never as markup: rich's markup and emoji codes are off, and
every character the one allowlist refuses (``contracts.escaped``: controls, format
and bidi characters, tags, variation selectors, anything unassigned or private) is
shown as its escape (``printable``), in tables and in every line the CLI writes
(``PrintableStream``). A cell is shortened and laid out after it is escaped, between
escapes, never inside one.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from contracts import (
    CallView,
    JsonValue,
    RunList,
)
from shim.cli.printable import PrintableStream, printable

__all__ = [
    "PrintableStream",
    "cli_table",
    "console",
    "console_to",
    "error_lines",
    "expanded",
    "fields",
    "fits",
    "ledger_table",
    "print_records",
    "printable",
    "records",
    "run_list",
    "short",
]

# Wide enough that a piped line is one row; a terminal uses its own width.
_PIPE_WIDTH = 200


class _Console(Console):
    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Every string rich is given (a cell, a line) is laid out as printable text."""
        return super().render_str(printable(text), **kwargs)

    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the CLI's main turns a closed pipe into its own
        # quiet exit (141), the same for tables and for --json.
        self.quiet = True
        raise BrokenPipeError


def console_to(file: TextIO, width: int) -> Console:
    """A console as the CLI's own, writing to ``file`` at ``width`` columns."""
    return _Console(file=file, width=width, markup=False, emoji=False, highlight=False)


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    raw: TextIO = stream.raw if isinstance(stream, PrintableStream) else stream
    width = None if raw.isatty() or os.environ.get("COLUMNS") else _PIPE_WIDTH
    return _Console(file=raw, width=width, markup=False, emoji=False, highlight=False)


# An escape ``printable`` writes: cut inside, it would show a different character.
_ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def _whole_escapes(text: str, end: int) -> str:
    """``text[:end]``, moved back to the start of an escape that ``end`` falls inside."""
    for found in _ESCAPE.finditer(text, max(0, end - 9), end + 9):
        if found.start() < end < found.end():
            return text[: found.start()]
    return text[:end]


def short(value: JsonValue, limit: int = 60) -> str:
    """One line of at most ``limit`` characters; a cut ends at a word, with an ellipsis.

    The text is escaped before it is measured and cut, so a hidden character counts
    as the width of its escape and a cut never falls inside one."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(printable(str(text)).split())
    if len(text) <= limit:
        return text
    cut = _whole_escapes(text, limit - 1)
    if " " in cut[limit // 2 :]:  # a word boundary in the second half: cut there
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


# What a cell is laid out in: one escape, or one character.
_UNIT = re.compile(_ESCAPE.pattern + "|.", re.DOTALL)


def _whole_units(word: str, width: int) -> list[str]:
    """``word`` folded into lines of at most ``width`` cells, never inside an escape;
    an escape wider than the column is shown as an ellipsis rather than in part."""
    lines = [""]
    for found in _UNIT.findall(word):
        unit = "…" if cell_len(found) > width else found
        if lines[-1] and cell_len(lines[-1] + unit) > width:
            lines.append("")
        lines[-1] += unit
    return lines


def _laid_out(text: str, width: int, wrap: bool) -> list[str]:
    """``text`` in lines of at most ``width`` cells: wrapped at spaces, a word wider
    than the column folded (or, in a column that does not wrap, cut with an
    ellipsis), in both cases between escapes, never inside one."""
    width = max(1, width)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            joined = f"{line} {word}" if line else word
            if cell_len(joined) <= width:
                line = joined
                continue
            if not wrap:
                line = _whole_units(joined, width - 1)[0] + "…"
                break
            if line:
                lines.append(line)
            *full, line = _whole_units(word, width)
            lines.extend(full)
        lines.append(line)
    return lines


class _Cell:
    """A table cell of text from a run: printable, and laid out by whole escapes.

    rich would cut a word wider than its column at any character, the middle of
    ``\\u202e`` included, and show the half as something else."""

    def __init__(self, text: str) -> None:
        self.text = printable(text)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        # As rich measures text: the widest word, the widest line.
        words = [cell_len(w) for w in self.text.split()]
        lines = [cell_len(line) for line in self.text.split("\n")]
        return Measurement(max(words, default=0), max(lines, default=0))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in _laid_out(self.text, options.max_width, not options.no_wrap):
            yield Text(line, no_wrap=True, overflow="crop")


class _Rows(Table):
    """A table whose text cells are ``_Cell``: what the CLI's tables are made of."""

    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        cells = [_Cell(r) if isinstance(r, str) else r for r in renderables]
        super().add_row(*cells, **kwargs)


def cli_table(*columns: str, title: str | None = None) -> Table:
    table = _Rows(
        *columns,
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        min_width=len(title) if title else None,  # a title is never wrapped
    )
    table.title_style = "bold"
    return table


def fields(title: str, values: dict[str, JsonValue]) -> Table:
    """A small answer (accepted, decided, replayed, …) as name / value rows."""
    grid = cli_table("field", "value", title=title)
    grid.show_header = False
    # A narrow terminal wraps a long value (a digest, an id) onto the next line rather
    # than cutting it: every character an approver compares is on screen.
    grid.columns[0].no_wrap = True
    grid.columns[1].overflow = "fold"
    for key, value in values.items():
        grid.add_row(key, "-" if value is None else short(value, 120))
    return grid


def run_list(page: RunList) -> Table:
    table = cli_table("run", "status", "recipe", "submitted by", "objective", "error", "created")
    for r in page.runs:
        table.add_row(
            r.run_id,
            r.status.value,
            r.recipe,
            r.submitted_by or "-",
            short(r.objective or "", 40),
            r.error_code or "",
            r.created_at,
        )
    if page.next_cursor:
        table.caption = f"more: --cursor '{page.next_cursor}'"
        table.caption_justify = "left"
    return table


def ledger_table(calls: Sequence[CallView]) -> Table:
    table = cli_table(
        "#", "step", "attempt", "kind", "target", "status", "op_key", "sent", "ms", "error"
    )
    for i, c in enumerate(calls, 1):
        table.add_row(
            str(i),
            c.step_id,
            str(c.attempt),
            c.kind,
            short(c.target, 40),
            c.status,
            c.op_key[:16] + "…",
            str(c.sends),
            "" if c.duration_ms is None else str(c.duration_ms),
            c.error_code or "",
        )
    resent = [c for c in calls if c.resends]
    if resent:  # why each was sent again, under the table
        table.caption = "\n".join(
            f"{c.op_key[:16]}… sent again {r.at} by {r.executor_id}: {r.why}"
            for c in resent
            for r in c.resends
        )
        table.caption_justify = "left"
    return table


def records(
    title: str, columns: Sequence[str], rows: Iterable[dict[str, JsonValue]], limit: int = 60
) -> Table:
    """Rows of plain JSON objects, the named columns each cut to one line of ``limit``.

    A column of single words (ids, digests, statuses, stamps) is never cut or wrapped
    when the terminal is narrow: the prose columns give way, so an id can be copied."""
    table = cli_table(*columns, title=title)
    cells = [
        ["" if row.get(c) is None else short(row.get(c), limit) for c in columns] for row in rows
    ]
    for at, column in enumerate(table.columns):
        values = [line[at] for line in cells]
        if values and all(len(v.split()) <= 1 for v in values):
            column.no_wrap = True
            column.min_width = min(72, max(len(str(column.header)), *map(len, values)))
    for line in cells:
        table.add_row(*line)
    return table


def fits(table: Table, width: int) -> bool:
    """Whether ``table`` is laid out in ``width`` columns with no cell cut: rich crops
    a row wider than the console, ids and stamps with it."""
    unbounded = Console(file=io.StringIO(), width=1_000_000)
    return unbounded.measure(table).minimum <= width


def expanded(columns: Sequence[str], rows: Iterable[dict[str, JsonValue]]) -> list[str]:
    """Rows too wide for the terminal, one ``column | value`` line per cell and nothing
    cut (psql's expanded display): the terminal wraps a long value, it never loses it."""
    pad = max(map(len, columns), default=0)
    lines: list[str] = []
    for n, row in enumerate(rows, start=1):
        lines.append(f"-[ row {n} ]-")
        for c in columns:
            value = row.get(c)
            text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
            lines.append(f"{c:<{pad}} | {text}")
    return lines


def print_records(
    title: str, columns: Sequence[str], rows: Sequence[dict[str, JsonValue]], limit: int = 60
) -> None:
    """``records`` on stdout when it fits the terminal; wider than that, one line per
    cell (``expanded``), so that no id or stamp is cut."""
    table = records(title, columns, rows, limit)
    out = console()
    if fits(table, out.width):
        out.print(table)
    else:
        sys.stdout.write("\n".join([title, *expanded(columns, rows)]) + "\n")


def error_lines(details: JsonValue) -> list[str]:
    """An API error's ``details`` as lines a person can act on."""
    if not isinstance(details, dict):
        return []
    lines: list[str] = []
    for key, value in details.items():
        if key == "errors" and isinstance(value, list):
            for e in value:
                if isinstance(e, dict) and "problem" in e:
                    lines.append(f"  {e.get('path') or '/'}: {e['problem']}")
                else:
                    lines.append(f"  {short(e, 200)}")
        elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            lines.append(f"  {key}: {', '.join(str(v) for v in value)}")
        else:
            lines.append(f"  {key}: {short(value, 200)}")
    return lines
