"""Rows wider than the terminal: a table would crop them (an op key, a run id, a stamp
cut short, a last column gone), so they are printed one ``column | value`` line per
cell instead, nothing cut."""

from __future__ import annotations

import io

from rich.console import Console

from contracts import JsonValue
from shim.cli.render import expanded, fits, records

OP_KEY = "a" * 64
RUN = "run_" + "b" * 32
STAMP = "2026-11-26T19:52:51.123456+00:00"
WIDE: dict[str, JsonValue] = {
    "op_key": OP_KEY,
    "run_id": RUN,
    "step_id": "fetch_page",
    "attempt": 1,
    "created_at": STAMP,
    "target": "https://example.com/some/page",
    "note": None,
}


def _printed(table: object, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width).print(table)
    return out.getvalue()


def test_a_table_wider_than_the_terminal_does_not_fit() -> None:
    table = records("1 row(s)", list(WIDE), [WIDE], limit=500)
    assert not fits(table, 80)
    assert RUN not in _printed(table, 80)  # what a table would do: crop
    assert fits(table, 400)
    assert RUN in _printed(table, 400) and OP_KEY in _printed(table, 400)


def test_prose_that_wraps_still_fits() -> None:
    row: dict[str, JsonValue] = {"run_id": RUN, "objective": "a long objective " * 20}
    assert fits(records("1 row(s)", list(row), [row], limit=500), 80)


def test_expanded_rows_keep_every_value_whole() -> None:
    lines = expanded(list(WIDE), [WIDE, {**WIDE, "attempt": 2}])
    assert lines[0] == "-[ row 1 ]-" and "-[ row 2 ]-" in lines
    assert f"op_key     | {OP_KEY}" in lines
    assert f"run_id     | {RUN}" in lines
    assert f"created_at | {STAMP}" in lines
    assert "attempt    | 2" in lines
    assert "note       | " in lines
