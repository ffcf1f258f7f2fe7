"""Every product package is in pyproject's package list: a wheel built from it
would otherwise lack the folder, though an editable install still finds it."""

from __future__ import annotations

import tomllib

from tests.static._source import REPO_ROOT

PRODUCT = ("contracts", "shim", "worker", "ledger", "policies", "vendor", "opa_format")


def test_every_package_folder_is_listed() -> None:
    listed = set(
        tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for top in PRODUCT
        for init in (REPO_ROOT / top).rglob("__init__.py")
        if "node_modules" not in init.parts
    }
    assert found - listed == set(), f"pyproject.toml does not list {sorted(found - listed)}"
