"""A second terminal: the commands that read the database directly (``sql``,
``evidence export``) find it as ``gatehouse up`` did (--database-url,
GATEHOUSE_DATABASE_URL, ./dbos-config.yaml, the default) and never create one: a
SQLite file that is not there is a failure (exit 1) naming the URL tried and where
it came from, and no file appears."""

from __future__ import annotations

from pathlib import Path

import pytest

from shim.cli import Exit, main

RUN = "run_" + "0" * 32


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of its own, without the stack's environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEHOUSE_DATABASE_URL", raising=False)
    monkeypatch.delenv("GATEHOUSE_SIGNING_KEY", raising=False)
    with pytest.raises(SystemExit) as done:
        main(["evidence", "keygen", "--output", str(tmp_path / "key.pem")])
    assert done.value.code == 0
    return tmp_path


def _readers(folder: Path) -> list[list[str]]:
    key = str(folder / "key.pem")
    return [["sql", "SELECT * FROM v_run_overview"], ["evidence", "export", RUN, "--key", key]]


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == Exit.FAILED, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return " ".join(err.split())


def test_without_the_stacks_url_nothing_is_created(
    elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in _readers(elsewhere):
        said = _refusal(argv, capsys)
        assert "no database at sqlite:///gatehouse.sqlite (the default database URL)" in said
        assert "GATEHOUSE_DATABASE_URL" in said and "dbos-config.yaml" in said
        assert not (elsewhere / "gatehouse.sqlite").exists(), argv
    assert sorted(p.name for p in elsewhere.iterdir()) == ["key.pem", "key.pub.pem"]


def test_the_url_is_found_as_up_finds_it(
    elsewhere: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbos-config.yaml in the folder, then the variable over it, then the flag over both:
    each refusal names the URL it tried and where it came from."""
    (elsewhere / "dbos-config.yaml").write_text(
        "name: gatehouse\nsystem_database_url: sqlite:///from-config.sqlite\n"
    )
    for argv in _readers(elsewhere):
        said = _refusal(argv, capsys)
        assert (
            f"no database at sqlite:///from-config.sqlite ({elsewhere / 'dbos-config.yaml'})"
            in said
        )
    monkeypatch.setenv("GATEHOUSE_DATABASE_URL", "sqlite:///from-env.sqlite")
    for argv in _readers(elsewhere):
        said = _refusal(argv, capsys)
        assert "no database at sqlite:///from-env.sqlite (GATEHOUSE_DATABASE_URL)" in said
    for argv in _readers(elsewhere):
        said = _refusal([*argv, "--database-url", "sqlite:///flag.sqlite"], capsys)
        assert "no database at sqlite:///flag.sqlite (--database-url)" in said
    left = {p.name for p in elsewhere.iterdir()}
    assert left == {"key.pem", "key.pub.pem", "dbos-config.yaml"}
