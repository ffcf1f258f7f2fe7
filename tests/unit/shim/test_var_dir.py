"""``gatehouse up --var X`` keeps everything of the stack under X, nothing under ./var.

The shim's and each worker's settings are built from the very environment the
stack hands them (``stack_env``, ``shim_env``, ``worker_env``), in a folder
whose own ``./var`` is a different place from X; every path in those settings
must lie outside that ``./var``, and each file the stack writes or reads as its
own under X. A path setting added later with a default under ``var/`` that
``up`` does not place fails here. ``tests/static/test_var_defaults.py`` holds
the other half: no product module spells a path under ``var/`` except as a
named default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from shim.local import shim_env, stack_env, worker_env
from shim.settings import ShimSettings
from worker.runtime import WorkerSettings

DATABASE = "sqlite:///gatehouse.sqlite"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working folder of its own, and no GATEHOUSE_ variable from the caller's shell."""
    for name in list(os.environ):
        if name.startswith("GATEHOUSE_"):
            monkeypatch.delenv(name)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield tmp_path / "the-var"


def _paths(settings: object) -> dict[str, Path]:
    assert dataclasses.is_dataclass(settings)
    return {
        f.name: value
        for f in dataclasses.fields(settings)
        if isinstance(value := getattr(settings, f.name), Path)
    }


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def test_every_path_the_stack_is_handed_lies_under_var(elsewhere: Path) -> None:
    var = elsewhere
    kept = stack_env(var)
    shim = ShimSettings.from_env(shim_env(DATABASE, var / "tokens.json", kept))
    worker = WorkerSettings.from_env(
        worker_env(DATABASE, "worker-1", var.resolve() / "workspaces", kept)
    )
    here_var = Path("var")
    found = {f"shim.{k}": v for k, v in _paths(shim).items()}
    found |= {f"worker.{k}": v for k, v in _paths(worker).items()}
    assert found, "no path settings found: the walk is broken"
    under_here = {k: str(v) for k, v in found.items() if _inside(v, here_var)}
    assert not under_here, f"--var {var} ignored: {under_here}"
    for name in (
        "shim.anchor_file",
        "shim.opa_trust_dir",
        "shim.tokens_file",
        "worker.anchor_file",
        "worker.opa_trust_dir",
        "worker.workspace_root",
        "worker.opencode_state",
    ):
        assert _inside(found[name], var), (name, found[name])
    assert shim.anchor_file.resolve() == worker.anchor_file.resolve()
    assert shim.opa_trust_dir.resolve() == worker.opa_trust_dir.resolve()


def test_a_place_the_environment_names_wins(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    chosen = tmp_path / "kept-elsewhere.jsonl"
    monkeypatch.setenv("GATEHOUSE_ANCHOR_FILE", str(chosen))
    assert stack_env(elsewhere)["GATEHOUSE_ANCHOR_FILE"] == str(chosen)
