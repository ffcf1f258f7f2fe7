"""``gatehouse --help`` and ``--version`` start without importing any command or what
commands need (the database, the HTTP client, the contracts): each is checked in a
fresh interpreter by what it has in ``sys.modules`` afterwards, not by a clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import contracts
from shim.cli import COMMANDS, main

# Each is a quarter of a second or more to import, and --help needs none of them.
HEAVY = ("sqlalchemy", "dbos", "httpx", "pydantic", "rich", "contracts", "ledger", "policies")

_PROBE = """
import json, sys
from shim.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout = sys.__stdout__
print(json.dumps(sorted(sys.modules)))
"""


def _imported(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_help_and_version_import_no_command_and_nothing_heavy(argv: list[str]) -> None:
    modules = _imported(*argv)
    assert _heavy(modules) == []
    assert not [m for m in modules if m.startswith("shim.cli.commands.")]
    assert not {"shim.local", "shim.cli.client", "shim.cli.database"} & modules


def test_a_command_imports_its_own_module_alone() -> None:
    modules = _imported("workers", "--help")
    assert "shim.cli.commands.workers" in modules
    assert not [
        m for m in modules if m.startswith("shim.cli.commands.") and not m.endswith(".workers")
    ]


def test_the_probe_sees_a_heavy_import() -> None:
    """The check can fail: a command that reads the database imports it."""
    assert "sqlalchemy" in _imported("sql", "--help")


def test_the_version_names_the_contracts_application_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    # The CLI keeps a copy of it (importing the contracts is slow): the two agree.
    assert f"(application version {contracts.APP_VERSION})\n" in capsys.readouterr().out


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
