"""Every product package is in what pyproject's package search finds: a wheel built
from it would otherwise lack the folder, though an editable install still finds it."""

from __future__ import annotations

import tomllib

from setuptools import find_packages

from tests.static._source import REPO_ROOT

PRODUCT = ("contracts", "shim", "worker", "ledger", "policies", "vendor", "opa_format")


def test_every_package_folder_is_listed() -> None:
    search = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = search["packages"]["find"]["include"]
    listed = set(find_packages(str(REPO_ROOT), include=include))
    found = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for top in PRODUCT
        for init in (REPO_ROOT / top).rglob("__init__.py")
        if "node_modules" not in init.parts
    }
    assert found - listed == set(), f"pyproject.toml does not list {sorted(found - listed)}"
    assert listed - found == set(), f"pyproject.toml finds what is no package: {listed - found}"
