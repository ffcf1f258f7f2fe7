"""``Client.from_env`` finds the shim as the CLI does: ``GATEHOUSE_URL``, else the stack
``gatehouse up`` runs from the current folder (``var/stack.json``), else the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from shim.client import DEFAULT_URL, AsyncClient, Client, shim_url
from shim.stackfile import note_stack


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("GATEHOUSE_URL", "GATEHOUSE_TOKEN", "GATEHOUSE_CA"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_nothing_said_is_the_default(here: Path) -> None:
    assert shim_url() == (DEFAULT_URL, "the default")
    with Client.from_env("t") as api:
        assert api.base_url == DEFAULT_URL


def test_the_stack_up_runs_here_is_found(here: Path) -> None:
    (here / "var").mkdir()
    note_stack(here / "var", "sqlite:///x.sqlite", "http://127.0.0.1:8123")  # this process's
    assert shim_url()[0] == "http://127.0.0.1:8123"
    with Client.from_env("t") as api:
        assert api.base_url == "http://127.0.0.1:8123"
    assert AsyncClient.from_env("t").base_url == "http://127.0.0.1:8123"


def test_the_variable_wins_and_names_the_token(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (here / "var").mkdir()
    note_stack(here / "var", "sqlite:///x.sqlite", "http://127.0.0.1:8123")
    monkeypatch.setenv("GATEHOUSE_URL", "http://127.0.0.1:8456")
    monkeypatch.setenv("GATEHOUSE_TOKEN", "from-the-environment")
    assert shim_url() == ("http://127.0.0.1:8456", "GATEHOUSE_URL")
    with Client.from_env() as api:
        assert api.base_url == "http://127.0.0.1:8456"
        assert api._http.headers["Authorization"] == "Bearer from-the-environment"
