"""The README and docs say what the code does: codes, routes, commands, tasks, settings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from contracts import ErrorCode
from shim.app import create_app
from shim.cli import COMMANDS, build_parser
from shim.settings import ShimSettings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
PRODUCT = ("contracts", "shim", "worker", "ledger", "policies", "opa_format")


def _table_rows(text: str, first_cell: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and re.fullmatch(first_cell, cells[0]):
            rows.append(cells)
    return rows


def test_the_two_commands() -> None:
    assert "npx -y @jdxcode/mise run demo" in README
    assert "npx -y @jdxcode/mise run check" in README
    assert "mise run check" in (ROOT / ".ci" / "run").read_text()


def test_every_error_code_is_listed_with_its_number_and_status() -> None:
    rows = {r[0].strip("`"): r for r in _table_rows(README, r"`[a-z_]+`")}
    for code in ErrorCode:
        assert code.value in rows, f"README's error table lacks {code.value}"
        _, number, status, retryable, _meaning = rows[code.value][:5]
        assert number == str(code.spec.number), code
        assert status == str(code.http_status), code
        assert retryable == ("yes" if code.retryable else "no"), code
    listed = {k for k, r in rows.items() if len(r) == 5 and r[1].isdigit()}
    assert listed <= {c.value for c in ErrorCode}, "README lists codes that do not exist"


def test_every_route_is_documented() -> None:
    app = create_app(ShimSettings.from_env({}))
    documented = {r[0].strip("`") for r in _table_rows(README, r"`(GET|POST) /[^`]*`")}
    actual = set()
    for route in app.routes:
        path = getattr(route, "path", "")
        if path.startswith(("/docs", "/redoc", "/openapi")):
            continue
        for method in sorted(getattr(route, "methods", set()) - {"HEAD", "OPTIONS"}):
            actual.add(f"{method} {path}")
    assert actual == documented


def test_every_cli_command_is_documented_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    documented = {r[0].strip("`").split()[1] for r in _table_rows(README, r"`gatehouse [a-z]+`")}
    assert documented == set(COMMANDS)
    for name in COMMANDS:
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([name, "--help"])
        assert done.value.code == 0
        assert COMMANDS[name] in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n#", start + len(title))
    return README[start : end if end != -1 else None]


def test_every_mise_task_is_documented() -> None:
    tasks = set(tomllib.loads((ROOT / "mise.toml").read_text())["tasks"])
    section = _section("### mise tasks")
    documented = {r[0].strip("`") for r in _table_rows(section, r"`[a-z0-9:-]+`") if len(r) == 2}
    assert tasks == documented


def test_every_setting_is_documented() -> None:
    used: set[str] = set()
    sources = [
        p for pkg in (*PRODUCT, "bench", "tests/support") for p in (ROOT / pkg).rglob("*.py")
    ]
    for path in [*sources, ROOT / "tests" / "conftest.py"]:
        used |= set(re.findall(r"\"(GATEHOUSE_[A-Z_]+)\"", path.read_text("utf-8")))
    documented = {r[0].strip("`") for r in _table_rows(README, r"`GATEHOUSE_[A-Z_]+`")}
    assert used == documented


def test_architecture_names_every_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    for folder in (*PRODUCT, "vendor", "tests", "bench", "docs"):
        assert f"`{folder}/`" in text, folder


def test_docs_exist() -> None:
    for name in ("architecture.md", "operators.md", "security.md", "benchmarks.md"):
        assert (ROOT / "docs" / name).is_file(), name


def test_operator_views_are_documented() -> None:
    text = (ROOT / "docs" / "operators.md").read_text("utf-8")
    for view in (ROOT / "ledger" / "views").glob("*.sql"):
        assert view.stem in text, view.stem
