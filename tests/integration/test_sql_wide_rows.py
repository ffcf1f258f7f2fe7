"""``gatehouse sql`` prints ids whole: a row wider than the terminal is printed one
``column | value`` line per cell, never a table that crops it."""

from __future__ import annotations

import pytest

from shim.cli import main

OP_KEY = "c" * 64
RUN = "run_" + "d" * 32
STAMP = "2026-11-26T19:52:51.123456+00:00"
TARGET = "https://example.com/some/page"


def _gatehouse(*argv: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == 0


def test_sql_never_cuts_an_id(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _gatehouse("migrate", "--database-url", db_url)
    capsys.readouterr()
    wide = (
        f"SELECT '{OP_KEY}' AS op_key, '{RUN}' AS run_id, 'fetch_page' AS step_id,"
        f" '{STAMP}' AS created_at, '{TARGET}' AS target"
    )
    _gatehouse("sql", wide, "--database-url", db_url)
    out = capsys.readouterr().out
    assert f"op_key     | {OP_KEY}" in out and f"run_id     | {RUN}" in out, out
    assert f"created_at | {STAMP}" in out and f"target     | {TARGET}" in out, out
    _gatehouse("sql", f"SELECT '{RUN}' AS run_id, 'ok' AS status", "--database-url", db_url)
    narrow = capsys.readouterr().out
    assert RUN in narrow and "-[ row" not in narrow, narrow  # it fits: a table
