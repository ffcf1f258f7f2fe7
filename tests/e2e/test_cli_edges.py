"""End to end: the real ``gatehouse`` command where things go wrong at the edge.

A database that is down, a missing tokens file, a bad role, an empty flag:
each is one line on stderr naming the fix, a non-zero exit, no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shim.local import free_port

GATEHOUSE = str(Path(sys.executable).parent / "gatehouse")


def _run(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    return subprocess.run(
        [GATEHOUSE, *argv],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "where",
    [
        "postgresql://postgres@127.0.0.1:{port}/gatehouse",  # nothing listens there
        "sqlite:///{tmp}/no/such/folder/gatehouse.sqlite",
    ],
    ids=["postgres", "sqlite"],  # the same ids in every pytest-xdist worker
)
def test_migrate_and_sql_with_the_database_away(tmp_path: Path, where: str) -> None:
    url = where.format(tmp=tmp_path, port=free_port())
    for argv in (["migrate"], ["sql", "SELECT 1"]):
        done = _run(*argv, "--database-url", url, cwd=tmp_path)
        assert done.returncode in (1, 2), done
        line = _one_line(done)
        assert "--database-url" in line
        if not url.startswith("sqlite"):
            expected = "cannot reach the database"
        else:  # migrate would create the file, but not its folder; sql never creates one
            expected = "no folder" if argv == ["migrate"] else "no database at"
        assert expected in line, line
    by_env = _run("migrate", cwd=tmp_path, GATEHOUSE_DATABASE_URL=url)
    assert by_env.returncode != 0 and "GATEHOUSE_DATABASE_URL" in _one_line(by_env)


def test_sql_blames_the_flag_that_was_used(tmp_path: Path) -> None:
    empty = _run("sql", "SELECT 1", "--database-url", "", cwd=tmp_path)
    assert empty.returncode == 2
    line = _one_line(empty)
    assert line.startswith("gatehouse: --database-url is empty") and "is the variable" in line
    bad = _run("sql", "SELECT 1", cwd=tmp_path, GATEHOUSE_DATABASE_URL="mysql://x")
    assert bad.returncode == 2 and "GATEHOUSE_DATABASE_URL must start with" in _one_line(bad)


def test_shim_without_a_tokens_file_names_the_default_and_the_fix(tmp_path: Path) -> None:
    done = _run("shim", "--port", str(free_port()), cwd=tmp_path)
    assert done.returncode == 2
    line = _one_line(done)
    assert "no tokens file at var/tokens.json" in line and "gatehouse tokens add" in line
    other = _run("shim", cwd=tmp_path, GATEHOUSE_TOKENS_FILE=str(tmp_path / "t.json"))
    assert other.returncode == 2 and f"no tokens file at {tmp_path / 't.json'}" in other.stderr


def test_shim_processes_must_be_one_or_more(tmp_path: Path) -> None:
    tokens = tmp_path / "t.json"
    tokens.write_text("{}")
    done = _run("shim", "--processes", "0", cwd=tmp_path, GATEHOUSE_TOKENS_FILE=str(tokens))
    assert done.returncode == 2 and "--processes must be 1 or more, not 0" in _one_line(done)


def test_tokens_add_lists_valid_roles_and_says_when_it_counts(tmp_path: Path) -> None:
    bad = _run("tokens", "add", "alice", "--roles", "submitter,admin", cwd=tmp_path)
    assert bad.returncode == 2
    line = _one_line(bad)
    assert "unknown role 'admin'" in line and "submitter, approver, operator" in line
    assert not (tmp_path / "var" / "tokens.json").exists()

    good = _run("tokens", "add", "alice", "--roles", "submitter", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "var" / "tokens.json").is_file()  # the same default as the shim's
    assert good.stdout.splitlines()[-1].startswith("gh_")
    assert "picks the change up within a second" in _one_line(good)


def test_every_command_has_help_that_runs(tmp_path: Path) -> None:
    from shim.cli import COMMANDS

    worker = _run("worker", "--help", cwd=tmp_path)
    assert worker.returncode == 0 and "GATEHOUSE_EXECUTOR_ID" in worker.stdout
    top = _run("--help", cwd=tmp_path)
    assert top.returncode == 0 and "exit codes:" in top.stdout
    assert all(name in top.stdout for name in COMMANDS)


def test_read_only_commands_never_create_a_database(tmp_path: Path) -> None:
    """A second terminal without the stack's GATEHOUSE_DATABASE_URL: `sql` and `evidence
    export` name the URL they tried and how to give the right one; no file appears."""
    key = tmp_path / "key.pem"
    made = _run("evidence", "keygen", "--output", str(key), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    for argv in (
        ["sql", "SELECT * FROM v_run_overview"],
        ["evidence", "export", "run_" + "0" * 32, "--key", str(key)],
    ):
        done = _run(*argv, cwd=tmp_path)
        assert done.returncode == 1, done
        line = _one_line(done)
        assert "no database at sqlite:///gatehouse.sqlite (the default database URL)" in line
        assert "GATEHOUSE_DATABASE_URL" in line
        assert not (tmp_path / "gatehouse.sqlite").exists(), argv
