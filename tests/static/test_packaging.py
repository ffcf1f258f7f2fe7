"""Every product package is in what pyproject's package search finds: a wheel built
from it would otherwise lack the folder, though an editable install still finds it."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase

from tests.static._source import REPO_ROOT

PRODUCT = ("contracts", "shim", "worker", "ledger", "policies", "vendor", "opa_format")


def test_every_package_folder_is_listed() -> None:
    search = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = search["packages"]["find"]["include"]
    # setuptools' find: every folder with an __init__.py whose dotted name matches
    listed = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for init in REPO_ROOT.rglob("__init__.py")
        if not {".venv", "node_modules", "build"} & set(init.parts)
    }
    listed = {name for name in listed if any(fnmatchcase(name, pat) for pat in include)}
    found = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for top in PRODUCT
        for init in (REPO_ROOT / top).rglob("__init__.py")
        if "node_modules" not in init.parts
    }
    assert found - listed == set(), f"pyproject.toml does not list {sorted(found - listed)}"
    assert listed - found == set(), f"pyproject.toml finds what is no package: {listed - found}"
