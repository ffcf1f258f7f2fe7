"""Which database a process uses: --database-url, the variable, dbos-config.yaml, the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import ErrorCode, GatehouseError
from ledger import CONFIG_FILE, DEFAULT_DATABASE_URL, resolve_database_url

ROOT = Path(__file__).resolve().parents[3]


def _write(folder: Path, text: str) -> Path:
    (folder / CONFIG_FILE).write_text(text, encoding="utf-8")
    return folder


def test_the_variable_wins_over_the_file(tmp_path: Path) -> None:
    folder = _write(tmp_path, "name: gatehouse\nsystem_database_url: sqlite:///from-file.db\n")
    env = {"GATEHOUSE_DATABASE_URL": "sqlite:///from-env.db"}
    assert resolve_database_url(env, folder) == ("sqlite:///from-env.db", "GATEHOUSE_DATABASE_URL")


def test_the_file_is_read_with_variables_substituted(tmp_path: Path) -> None:
    folder = _write(tmp_path, "name: gatehouse\nsystem_database_url: sqlite:///${DB_DIR}/g.db\n")
    url, where = resolve_database_url({"DB_DIR": "/data"}, folder)
    assert url == "sqlite:////data/g.db"
    assert where.endswith(CONFIG_FILE)


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    folder = _write(tmp_path, "name: gatehouse\nsystem_database_url: sqlite:///file.db\n")
    assert resolve_database_url({"GATEHOUSE_DATABASE_URL": " "}, folder)[0] == "sqlite:///file.db"


def test_the_project_file_with_no_variable_means_the_default(tmp_path: Path) -> None:
    # ${GATEHOUSE_DATABASE_URL} unset is empty: the default, as the DBOS CLI decides too
    folder = _write(tmp_path, (ROOT / CONFIG_FILE).read_text(encoding="utf-8"))
    assert resolve_database_url({}, folder) == (DEFAULT_DATABASE_URL, "the default database URL")
    assert DEFAULT_DATABASE_URL == "sqlite:///gatehouse.sqlite"


def test_another_applications_file_is_not_followed(tmp_path: Path) -> None:
    folder = _write(tmp_path, "name: shop\nsystem_database_url: postgresql://x@h/shop\n")
    assert resolve_database_url({}, folder)[0] == DEFAULT_DATABASE_URL


def test_no_file_means_the_default(tmp_path: Path) -> None:
    assert resolve_database_url({}, tmp_path)[0] == DEFAULT_DATABASE_URL


@pytest.mark.parametrize(
    "text", ["name: gatehouse\nsystem_database_url: [1, 2]\n", "name: [gatehouse\n  x: :\n"]
)
def test_a_broken_file_is_refused_with_its_code(tmp_path: Path, text: str) -> None:
    folder = _write(tmp_path, text)
    with pytest.raises(GatehouseError) as caught:
        resolve_database_url({}, folder)
    assert caught.value.code is ErrorCode.CONFIG_INVALID
    assert CONFIG_FILE in caught.value.message
